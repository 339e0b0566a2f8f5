package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

func goVersion() string { return runtime.Version() }

// writeChart draws throughput against workers, one line per mode and one
// panel per key count, as SVG; with procs above 1 the titles say the
// workers ran in that many processes.
func writeChart(path, db string, procs int, results []Result) error {
	var keys []int
	for _, r := range results {
		if !slices.Contains(keys, r.Keys) {
			keys = append(keys, r.Keys)
		}
	}
	plots := make([][]*plot.Plot, 1)
	for _, k := range keys {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %d %s", db, k, map[bool]string{true: "hot row", false: "rows"}[k == 1])
		if procs > 1 {
			p.Title.Text += fmt.Sprintf(", workers in %d processes", procs)
		}
		p.X.Label.Text = "workers"
		p.Y.Label.Text = "operations/s"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = workerTicks(results)
		// Set the range: gonum pads a single point's range down to 0,
		// which a log scale cannot draw.
		lo, hi := workerRange(results)
		p.X.Min, p.X.Max = lo*0.8, hi*1.25
		p.Legend.Top = true
		p.Y.Min = 0
		for i, m := range slices.Concat(AllModes, OptInModes) {
			var pts plotter.XYs
			for _, r := range results {
				if r.Keys == k && r.Mode == m {
					pts = append(pts, plotter.XY{X: float64(r.Workers), Y: r.OpsPerSec})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			points.Color = plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			p.Add(line, points)
			p.Legend.Add(m, line, points)
		}
		plots[0] = append(plots[0], p)
	}
	width := vg.Length(len(keys)) * 12 * vg.Centimeter
	c := vgsvg.New(width, 10*vg.Centimeter)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(keys), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align(plots, tiles, dc)
	for i, p := range plots[0] {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// workerTicks labels exactly the worker counts measured.
func workerTicks(results []Result) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for _, r := range results {
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(r.Workers) }) {
			ticks = append(ticks, plot.Tick{Value: float64(r.Workers), Label: fmt.Sprint(r.Workers)})
		}
	}
	return ticks
}

// workerRange is the smallest and largest worker count measured.
func workerRange(results []Result) (lo, hi float64) {
	lo, hi = 1, 1
	for i, r := range results {
		w := float64(r.Workers)
		if i == 0 || w < lo {
			lo = w
		}
		if i == 0 || w > hi {
			hi = w
		}
	}
	return lo, hi
}
