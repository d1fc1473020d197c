package chartdocs

import (
	"strings"
	"testing"
)

func TestRows(t *testing.T) {
	values := `
# -- Who places pods.
# Second line.
topology: extender
# not documented
hidden: 1
image:
  # -- Registry | prefix.
  registry: ""
  tag: v1
# -- Extra args.
extraArgs: []
nested:
  # -- A map.
  labels:
    a: "1"
`
	rows, err := Rows([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"topology", "string", `"extender"`, "Who places pods. Second line."},
		{"image.registry", "string", `""`, "Registry | prefix."},
		{"extraArgs", "list", `[]`, "Extra args."},
		{"nested.labels", "object", `{"a":"1"}`, "A map."},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	if tab := Table(rows); !strings.Contains(tab, `| `+"`image.registry`"+` | string | `+"`\"\"`"+` | Registry \| prefix. |`) {
		t.Errorf("table does not escape |:\n%s", tab)
	}
}

func TestRowsErrors(t *testing.T) {
	for _, in := range []string{"- a\n- b\n", "a: [\n"} {
		if _, err := Rows([]byte(in)); err == nil {
			t.Errorf("Rows(%q): no error", in)
		}
	}
}

func TestSplice(t *testing.T) {
	got, err := Splice("x\n"+Begin+"\nold\n"+End+"\ny\n", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "x\n" + Begin + "\nnew\n" + End + "\ny\n"; got != want {
		t.Errorf("Splice = %q, want %q", got, want)
	}
	if _, err := Splice("no markers", "t"); err == nil {
		t.Error("Splice without markers: no error")
	}
}
