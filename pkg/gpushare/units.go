package gpushare

import (
	"fmt"
	"strconv"
	"strings"
)

// Unit is the size of one gpu-mem unit. The extender never interprets it (it compares unit
// counts); the device plugin converts card memory to units and inspect prints its name.
type Unit struct {
	// MiB is the unit's size in MiB (1024 for GiB).
	MiB int64
}

// GiB is the default unit.
var GiB = Unit{MiB: 1024}

// ParseUnit parses "GiB", "MiB" or a positive multiple of either ("256MiB", "2GiB").
// Any other spelling is an error that names the accepted forms.
func ParseUnit(s string) (Unit, error) {
	t := strings.TrimSpace(s)
	var base int64
	switch {
	case strings.HasSuffix(t, "GiB"):
		base, t = 1024, strings.TrimSuffix(t, "GiB")
	case strings.HasSuffix(t, "MiB"):
		base, t = 1, strings.TrimSuffix(t, "MiB")
	default:
		return Unit{}, fmt.Errorf("memory unit %q: want GiB, MiB or a multiple such as 256MiB", s)
	}
	n := int64(1)
	if t != "" {
		v, err := strconv.ParseInt(t, 10, 64)
		if err != nil || v <= 0 || v > 1<<20 {
			return Unit{}, fmt.Errorf("memory unit %q: multiplier must be a positive integer", s)
		}
		n = v
	}
	return Unit{MiB: n * base}, nil
}

// String gives the canonical name: "GiB", "MiB", "2GiB", "256MiB". The zero Unit prints "GiB"
// (nodes that publish no unit use the protocol default).
func (u Unit) String() string {
	switch {
	case u.MiB <= 0 || u.MiB == 1024:
		return "GiB"
	case u.MiB == 1:
		return "MiB"
	case u.MiB%1024 == 0:
		return strconv.FormatInt(u.MiB/1024, 10) + "GiB"
	default:
		return strconv.FormatInt(u.MiB, 10) + "MiB"
	}
}

// UnitsOf converts card memory in MiB to whole units, rounding down (a T4's 15079 MiB is
// 14 GiB units).
func (u Unit) UnitsOf(mib int64) int64 {
	if u.MiB <= 0 {
		return mib / GiB.MiB
	}
	return mib / u.MiB
}

// MarshalText implements encoding.TextMarshaler so a Unit appears as its name in JSON.
func (u Unit) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; the empty string is the default GiB.
func (u *Unit) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*u = GiB
		return nil
	}
	v, err := ParseUnit(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}
