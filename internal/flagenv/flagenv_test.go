package flagenv

import (
	goflag "flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// values are the flags of the test command.
type values struct {
	Port    int
	TTL     time.Duration
	Addr    string
	Debug   bool
	Names   []string
	Cards   []int
	Labels  map[string]string
	Version bool
	V       string // registered after Bind, as klog's -v is
}

func defaults() values {
	return values{Port: 12345, TTL: 2 * time.Minute, Addr: ":9401", Names: []string{"a"}, V: "0"}
}

// newSet defines the test flags, binds them with opts and then adds a klog-like -v.
func newSet(v *values, opts ...Option) *pflag.FlagSet {
	*v = defaults()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.IntVar(&v.Port, "port", v.Port, "port to listen on")
	fs.DurationVar(&v.TTL, "reservation-ttl", v.TTL, "reservation lifetime")
	fs.StringVar(&v.Addr, "metrics-address", v.Addr, "metrics address")
	fs.BoolVar(&v.Debug, "debug", false, "debug")
	fs.StringSliceVar(&v.Names, "names", v.Names, "names")
	fs.IntSliceVar(&v.Cards, "cards", nil, "cards")
	fs.StringToStringVar(&v.Labels, "labels", nil, "labels")
	fs.BoolVar(&v.Version, "version", false, "print the version")
	Bind(fs, opts...)
	gfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	gfs.StringVar(&v.V, "v", "0", "log level")
	fs.AddGoFlagSet(gfs)
	return fs
}

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		args    []string
		env     map[string]string
		want    func(v *values)
		wantErr []string // substrings of the error
	}{
		{name: "defaults"},
		{
			name: "environment over default",
			env:  map[string]string{"GPUSHARE_PORT": "8080", "GPUSHARE_RESERVATION_TTL": "30s", "GPUSHARE_DEBUG": "true"},
			want: func(v *values) { v.Port, v.TTL, v.Debug = 8080, 30*time.Second, true },
		},
		{
			name: "command line over environment",
			args: []string{"--port=1", "--debug=false"},
			env:  map[string]string{"GPUSHARE_PORT": "8080", "GPUSHARE_DEBUG": "true", "GPUSHARE_RESERVATION_TTL": "1s"},
			want: func(v *values) { v.Port, v.TTL = 1, time.Second },
		},
		{
			name: "set but empty counts",
			env:  map[string]string{"GPUSHARE_METRICS_ADDRESS": ""},
			want: func(v *values) { v.Addr = "" },
		},
		{
			name:    "bad value names variable and flag",
			env:     map[string]string{"GPUSHARE_PORT": "many", "GPUSHARE_RESERVATION_TTL": "soon"},
			wantErr: []string{`environment variable GPUSHARE_PORT: invalid argument "many" for "--port"`, `GPUSHARE_RESERVATION_TTL: invalid argument "soon" for "--reservation-ttl"`},
		},
		{
			name:    "bad value of a flag given on the command line is not read",
			args:    []string{"--port=2"},
			env:     map[string]string{"GPUSHARE_PORT": "many"},
			want:    func(v *values) { v.Port = 2 },
			wantErr: nil,
		},
		{
			name: "unknown variables ignored",
			env:  map[string]string{"GPUSHARE_STATE_DIR": "/tmp", "GPUSHARE_NO_SUCH_FLAG": "x", "PORT": "1"},
		},
		{
			name: "slices and maps as one Set, replacing the default",
			env:  map[string]string{"GPUSHARE_NAMES": "b,c", "GPUSHARE_CARDS": "0,2", "GPUSHARE_LABELS": "a=1,b=2"},
			want: func(v *values) {
				v.Names, v.Cards, v.Labels = []string{"b", "c"}, []int{0, 2}, map[string]string{"a": "1", "b": "2"}
			},
		},
		{
			name: "slice on the command line wins whole",
			args: []string{"--names=x", "--names=y"},
			env:  map[string]string{"GPUSHARE_NAMES": "b,c"},
			want: func(v *values) { v.Names = []string{"x", "y"} },
		},
		{
			name:    "bad slice element",
			env:     map[string]string{"GPUSHARE_CARDS": "0,two"},
			wantErr: []string{"GPUSHARE_CARDS", "--cards"},
		},
		{
			name: "flags added after Bind read nothing",
			env:  map[string]string{"GPUSHARE_V": "9", "V": "9"},
		},
		{
			name: "Except",
			opts: []Option{Except("version")},
			env:  map[string]string{"GPUSHARE_VERSION": "v1.2.3", "GPUSHARE_PORT": "1"},
			want: func(v *values) { v.Port = 1 },
		},
		{
			name: "legacy names after the GPUSHARE_ one",
			opts: []Option{LegacyPrefix("")},
			env:  map[string]string{"PORT": "1", "GPUSHARE_PORT": "2", "METRICS_ADDRESS": ":1", "V": "9"},
			want: func(v *values) { v.Port, v.Addr = 2, ":1" },
		},
		{
			name:    "bad legacy value",
			opts:    []Option{LegacyPrefix("OLD_")},
			env:     map[string]string{"OLD_PORT": "x"},
			wantErr: []string{"environment variable OLD_PORT", "--port"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, val := range tc.env {
				t.Setenv(k, val)
			}
			var got values
			fs := newSet(&got, tc.opts...)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one mentioning %q", tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults()
			if tc.want != nil {
				tc.want(&want)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("flags (-want,+got):\n%s", d)
			}
		})
	}
}

func TestApplyTwice(t *testing.T) {
	t.Setenv("GPUSHARE_NAMES", "b,c")
	var v values
	fs := newSet(&v)
	for range 2 {
		if err := Apply(fs); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"b", "c"}, v.Names); d != "" {
		t.Errorf("names (-want,+got):\n%s", d)
	}
	if !fs.Changed("names") {
		t.Error("a flag set from the environment should count as changed")
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want map[string]string // flag → its usage
	}{
		{
			name: "default",
			want: map[string]string{
				"port":            "port to listen on (env GPUSHARE_PORT)",
				"reservation-ttl": "reservation lifetime (env GPUSHARE_RESERVATION_TTL)",
				"version":         "print the version (env GPUSHARE_VERSION)",
				"v":               "log level",
			},
		},
		{
			name: "except and legacy",
			opts: []Option{Except("version"), LegacyPrefix(""), LegacyPrefix("OLD_")},
			want: map[string]string{
				"port":    "port to listen on (env GPUSHARE_PORT; also PORT, OLD_PORT)",
				"version": "print the version",
				"v":       "log level",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v values
			fs := newSet(&v, tc.opts...)
			got := map[string]string{}
			for name := range tc.want {
				got[name] = fs.Lookup(name).Usage
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("usage (-want,+got):\n%s", d)
			}
			Bind(fs, tc.opts...) // again: a bound flag keeps its variables and usage
			if u := fs.Lookup("port").Usage; u != tc.want["port"] {
				t.Errorf("usage after a second Bind %q, want %q", u, tc.want["port"])
			}
			if u := fs.FlagUsages(); !strings.Contains(u, "(env GPUSHARE_PORT") {
				t.Errorf("FlagUsages lacks the variable:\n%s", u)
			}
		})
	}
}

func TestName(t *testing.T) {
	for flag, want := range map[string]string{
		"port":            "GPUSHARE_PORT",
		"reservation-ttl": "GPUSHARE_RESERVATION_TTL",
		"kube-api-qps":    "GPUSHARE_KUBE_API_QPS",
	} {
		if got := Name(flag); got != want {
			t.Errorf("Name(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestExceptUnknownFlagPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "--nope") {
			t.Errorf("recovered %v, want a panic naming --nope", r)
		}
	}()
	Bind(pflag.NewFlagSet("t", pflag.ContinueOnError), Except("nope"))
}
