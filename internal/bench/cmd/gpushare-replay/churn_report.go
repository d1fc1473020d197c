package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpushare/gpushare/internal/bench/replay"
)

// newChurnReportCommand is "gpushare-replay churn-report": the table of churn results and
// the chart of one trace.
func newChurnReportCommand() *cobra.Command {
	var chart, trace, title string
	var fromMin, toMin float64
	cmd := &cobra.Command{
		Use:   "churn-report [--chart f.svg --trace default] DIR...",
		Short: "Print the markdown table of every churn.json below DIR; chart allocated GPU over time for one trace, a line per scheduler",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, dirs []string) error {
			runs, err := replay.CollectChurn(dirs)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return fmt.Errorf("no churn.json below %v", dirs)
			}
			if err := replay.WriteChurnTable(os.Stdout, runs); err != nil {
				return err
			}
			if chart == "" {
				return nil
			}
			var lines []replay.ChurnLine
			from, to := fromMin*60, toMin*60
			for _, r := range runs {
				if r.Summary.Trace != trace {
					continue
				}
				if fromMin == 0 && toMin == 0 { // the arrival window and a quarter of it after
					from, to = r.Summary.WindowFrom, r.Summary.WindowFrom+1.25*r.Summary.Window
				}
				pts, err := replay.ReadChurnSeries(r.Dir)
				if err != nil {
					return err
				}
				label := fmt.Sprintf("%s (seed %d)", r.Summary.Scheduler, r.Summary.Seed)
				lines = append(lines, replay.ChurnLine{Label: label, Points: pts})
			}
			if len(lines) == 0 {
				return fmt.Errorf("no churn results of trace %s", trace)
			}
			if title == "" {
				title = trace + " under churn: allocated GPU over time"
			}
			f, err := os.Create(chart)
			if err != nil {
				return fmt.Errorf("creating chart: %w", err)
			}
			if err := replay.WriteChurnSVG(f, title, lines, from, to); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
	cmd.Flags().StringVar(&chart, "chart", "", "also write an SVG of allocated GPU % over time for --trace")
	cmd.Flags().StringVar(&trace, "trace", "default", "the trace charted")
	cmd.Flags().StringVar(&title, "title", "", "chart title")
	cmd.Flags().Float64Var(&fromMin, "from", 0, "chart from this replay minute (--from and --to 0: the arrival window and a quarter of it after)")
	cmd.Flags().Float64Var(&toMin, "to", 0, "chart up to this replay minute")
	return cmd
}
