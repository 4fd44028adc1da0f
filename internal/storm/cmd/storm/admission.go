package main

import (
	"fmt"

	"github.com/holdfast-db/holdfast/internal/storm"
)

// admissionTable runs holdfast's defaults without and with admission
// limits (storm.AdmissionStrategies) through both outages and prints
// them, with the median pod's recovery.
func admissionTable(pods int, seed uint64) error {
	hf := storm.Named(storm.Holdfast)
	var configs []storm.Config
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		for _, s := range append([]storm.Strategy{hf}, storm.AdmissionStrategies()...) {
			c := storm.Default(d, s)
			c.Pods, c.Seed = pods, seed
			configs = append(configs, c)
		}
	}
	results, err := runAll(configs)
	if err != nil {
		return err
	}
	fmt.Printf("\nholdfast's defaults with an admission limit per pod (holdfast.WithConnectLimit):\n\n")
	fmt.Println("| dependency down | strategy | peak during outage ×steady | peak after recovery ×steady | total load ×steady | retries % of first attempts | time to recovery (last request hurt) | median pod: reconnected | median pod: last request hurt | every pod connected | requests failed | connects not admitted |")
	fmt.Println("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range results {
		fmt.Printf("| %s | %s | %.1f× | %.1f× | %.1f× | %.1f%% | %.2f s | %.2f s | %.2f s | %.2f s | %d | %d |\n", r.Config.Dependency, r.Config.Strategy.Name,
			r.PeakOutage, r.PeakAfter, r.Total, 100*r.RetryShare, r.Recovery.Seconds(), r.ReconnectedMedian.Seconds(), r.HurtMedian.Seconds(),
			r.Reconnected.Seconds(), r.Failed, r.Refused)
	}
	return nil
}

func admissionIf(on bool, pods int, seed uint64) error {
	if !on {
		return nil
	}
	return admissionTable(pods, seed)
}
