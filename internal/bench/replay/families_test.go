package replay

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestFamilies(t *testing.T) {
	if len(Families) != len(FGDBaseline) {
		t.Fatalf("%d families, %d baselines", len(Families), len(FGDBaseline))
	}
	for _, f := range Families {
		if _, ok := FGDBaseline[f]; !ok {
			t.Errorf("family %s has no FGD figure", f)
		}
	}
	tab := Table{"offline": {"fgd": {
		"default":    {Runs: 10, Mean: 4.50, SD: 0.10, PodsPerSec: 600},
		"gpushare40": {Runs: 10, Mean: 6.50, SD: 0.20, PodsPerSec: 500},
		"cpu050":     {Runs: 0}, // never reached 100 %: not a result
	}}}
	rows := tab.FamilyRows("offline", "fgd")
	s := Summarize(rows)
	if s.Families != 2 || s.AtOrBelow != 1 {
		t.Fatalf("summary %+v, want 2 families, 1 at or below FGD", s)
	}
	wantOurs, wantFGD := (4.50+6.50)/2, (4.77+6.04)/2
	if d := s.Ours - wantOurs; d > 1e-9 || d < -1e-9 {
		t.Errorf("mean ours %v, want %v", s.Ours, wantOurs)
	}
	if d := s.Relative - (wantOurs-wantFGD)/wantFGD; d > 1e-9 || d < -1e-9 {
		t.Errorf("relative %v", s.Relative)
	}
	var b bytes.Buffer
	if err := WriteFamilies(&b, "fgd offline", rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| default | 4.50 ± 0.10 (10) | 4.77 | -0.27 ✓ | 0.943 | 600 |",
		"| gpushare40 | 6.50 ± 0.20 (10) | 6.04 | +0.46 | 1.076 | 500 |",
		"| cpu050 | – | 5.00 | | | |",
		"**mean of 2**",
		"At or below FGD on 1 of 2 families.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteFamiliesSVG(&b, "families <fgd>", rows); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Errorf("chart is not well-formed XML: %v", err)
	}
	// background, two legend boxes, two bars of ours, one FGD bar per family, the frame
	if n, want := strings.Count(b.String(), "<rect"), 1+2+2+len(Families)+1; n != want {
		t.Errorf("%d rects in the chart, want %d", n, want)
	}
}

func TestFamiliesWithBounds(t *testing.T) {
	tab := Table{"offline": {"fgd": {
		"default":    {Runs: 2, Mean: 4.50, SD: 0.10, PodsPerSec: 600},
		"gpushare40": {Runs: 1, Mean: 6.50, PodsPerSec: 500},
	}}}
	rows := WithBounds(tab.FamilyRows("offline", "fgd"), map[string]*Cell{
		"default": {Runs: 2, Mean: 2.75, SD: 0.05},
		"cpu050":  {Runs: 1, Mean: 2.00},
	})
	var b bytes.Buffer
	if err := WriteFamilies(&b, "fgd offline", rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| trace | bound | ours | FGD | ours − FGD | ours/FGD | ours − bound | FGD − bound | pods/s |",
		"| default | 2.75 ± 0.05 (2) | 4.50 ± 0.10 (2) | 4.77 | -0.27 ✓ | 0.943 | +1.75 | +2.02 | 600 |",
		"| gpushare40 | – | 6.50 (1) | 6.04 | +0.46 | 1.076 | | | 500 |",
		"| cpu050 | 2.00 (1) | – | 5.00 | | | | +3.00 | |",
		"Bound: mean 2.38 over 2 families; FGD − bound: mean +2.51. Ours − bound: mean +1.75 over 1 families.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Every row has as many cells as the header.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ") {
			if n := strings.Count(line, "|"); n != 10 {
				t.Errorf("%d bars in %q, want 10", n, line)
			}
		}
	}
}
