package topology

import "testing"

func TestIsRegion(t *testing.T) {
	for s, want := range map[string]bool{
		"us-east-1": true, "eu-central-2": true, "us-gov-west-1": true, "cn-north-1": true, "ap-southeast-5": true,
		"": false, "us-east": false, "us_east_1": false, "US-EAST-1": false, "us--1": false, "us-east-1.": false,
		"global": false, "a-b-c": false,
	} {
		if got := IsRegion(s); got != want {
			t.Errorf("IsRegion(%q) = %v; want %v", s, got, want)
		}
	}
}

func TestRegionOf(t *testing.T) {
	for host, want := range map[string]string{
		"orders.cluster-abc123.us-west-2.rds.amazonaws.com":    "us-west-2",
		"orders.cluster-ro-abc123.eu-west-1.rds.amazonaws.com": "eu-west-1",
		"orders-3.abc123.us-west-2.rds.amazonaws.com":          "us-west-2",
		"orders.global-abc123.global.rds.amazonaws.com":        "",
		"db.example.internal":                                  "",
		"10.0.0.1":                                             "",
	} {
		if got := RegionOf(host); got != want {
			t.Errorf("RegionOf(%q) = %q; want %q", host, got, want)
		}
	}
}
