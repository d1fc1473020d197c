// Package flagenv gives the flags of gpushare's commands their environment variables, under
// one convention: a flag not given on the command line is read from GPUSHARE_<FLAG>, the
// flag's name in upper case with '_' for '-' (--reservation-ttl ← GPUSHARE_RESERVATION_TTL).
// The command line wins over the environment, which wins over the default.
//
// Only the flags a command binds read the environment: Bind covers the flags a FlagSet holds
// when it is called, so a command calls it after defining its own flags and before adding
// klog's (or kubectl's connection flags), which keep their own rules; GPUSHARE_V never sets
// klog's -v. Bind records the variables in a flag annotation and appends them to the flag's
// help ("(env GPUSHARE_PORT)"); Apply, after parsing the command line, reads them.
//
// A variable that is set counts, even when empty (an empty GPUSHARE_METRICS_ADDRESS clears
// --metrics-address). Its value goes through the flag's own Set, as one command-line
// occurrence: slice and map flags take a comma-separated list that replaces the default. A
// value that does not parse is an error naming the variable and the flag. Variables with the
// prefix that name no bound flag are ignored: scripts share the GPUSHARE_ prefix.
package flagenv

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Prefix starts the environment variable of every bound flag.
const Prefix = "GPUSHARE_"

// Annotation is the flag annotation Bind sets: the environment variables the flag reads, in
// order of precedence.
const Annotation = "github.com/gpushare/gpushare/internal/flagenv"

// Name is the environment variable of flag: Prefix, then the flag's name in upper case with
// '_' for '-'.
func Name(flag string) string { return Prefix + upper(flag) }

func upper(flag string) string { return strings.ToUpper(strings.ReplaceAll(flag, "-", "_")) }

// An Option changes what Bind does.
type Option func(*config)

type config struct {
	except       map[string]bool
	legacyPrefix []string
}

// Except leaves the named flags without environment variable (a flag such as --version,
// which prints and exits, should not come from the environment).
func Except(flags ...string) Option {
	return func(c *config) {
		for _, f := range flags {
			c.except[f] = true
		}
	}
}

// LegacyPrefix makes every bound flag also read prefix+<FLAG> (upper case, '_' for '-'),
// after GPUSHARE_<FLAG>: the names a command read before this convention, kept working. An
// empty prefix gives the bare names (NODE_NAME for --node-name).
func LegacyPrefix(prefix string) Option {
	return func(c *config) { c.legacyPrefix = append(c.legacyPrefix, prefix) }
}

// Bind gives every flag fs holds now, but those of Except, its environment variables: it sets
// Annotation and appends "(env GPUSHARE_<FLAG>)" to the flag's usage. Flags added to fs
// later get none. Binding a flag again changes nothing. Bind panics when Except names a flag
// fs does not hold, as pflag does for a flag defined twice.
func Bind(fs *pflag.FlagSet, opts ...Option) {
	c := config{except: map[string]bool{}}
	for _, o := range opts {
		o(&c)
	}
	for name := range c.except {
		if fs.Lookup(name) == nil {
			panic(fmt.Sprintf("flagenv.Except: no flag --%s", name))
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if c.except[f.Name] || Vars(f) != nil {
			return
		}
		vars := []string{Name(f.Name)}
		for _, p := range c.legacyPrefix {
			vars = append(vars, p+upper(f.Name))
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[Annotation] = vars
		f.Usage += " " + helpText(vars)
	})
}

// helpText is what Bind appends to a flag's usage.
func helpText(vars []string) string {
	if len(vars) == 1 {
		return "(env " + vars[0] + ")"
	}
	return "(env " + vars[0] + "; also " + strings.Join(vars[1:], ", ") + ")"
}

// Vars returns the environment variables f reads, in order of precedence; nil when f is not
// bound.
func Vars(f *pflag.Flag) []string { return f.Annotations[Annotation] }

// Apply sets every bound flag of fs not given on the command line from the first of its
// environment variables that is set. Call it after fs.Parse. The error names each variable
// whose value the flag rejected, and the flag.
func Apply(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		for _, env := range Vars(f) {
			v, ok := os.LookupEnv(env)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s: %w", env, err))
			}
			return
		}
	})
	return errors.Join(errs...)
}
