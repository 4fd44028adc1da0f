package bluegreentest

import "testing"

func TestCanBind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hosts []string
		ok    bool
	}{
		{name: "127.0.0.1", hosts: []string{"127.0.0.1"}, ok: true},
		{name: "not an address of this machine", hosts: []string{"127.0.0.1", "192.0.2.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := canBind(tt.hosts...); (err == nil) != tt.ok {
				t.Errorf("canBind(%q) = %v, want ok %v", tt.hosts, err, tt.ok)
			}
		})
	}
}

func TestStartRejectsAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "same", cfg: Config{BlueHost: "127.0.0.5", GreenHost: "127.0.0.5"}},
		{name: "not loopback", cfg: Config{BlueHost: "192.0.2.1"}},
		{name: "a name", cfg: Config{GreenHost: "localhost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if env, err := Start(t.Context(), tt.cfg); err == nil {
				_ = env.Close()
				t.Errorf("Start(%+v) accepted the addresses", tt.cfg)
			}
		})
	}
}
