package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// barChart is one panel of grouped bars on a logarithmic value axis: a
// value per series and group.
type barChart struct {
	Title string
	// Groups label the groups along the x axis ("\n" breaks a line).
	Groups []string
	// Series name the bars of each group, in the legend.
	Series []string
	// Values holds one row per series, one value per group: NaN (or a
	// value that is not positive) where the run has none, drawn as no bar.
	Values [][]float64
	// Format labels each bar and the value axis' decades.
	Format func(float64) string
	// Ref, if positive, draws a dashed line across at that value (1 for
	// ratios).
	Ref float64
}

// Sans-serif text: the charts sit beside the README's sans-serif text.
func init() { plot.DefaultFont.Variant = "Sans" }

// seriesColors are the bars' colours by series name; other names take
// fallbackColors in order.
var seriesColors = map[string]color.Color{
	converge:                        color.RGBA{R: 0x1f, G: 0x6f, B: 0xb4, A: 0xff},
	clientGo:                        color.RGBA{R: 0xf0, G: 0x8a, B: 0x24, A: 0xff},
	controllerRuntime:               color.RGBA{R: 0x3a, G: 0x9a, B: 0x48, A: 0xff},
	"converge ÷ client-go":          color.RGBA{R: 0xf0, G: 0x8a, B: 0x24, A: 0xff},
	"converge ÷ controller-runtime": color.RGBA{R: 0x3a, G: 0x9a, B: 0x48, A: 0xff},
}

var fallbackColors = []color.Color{
	color.RGBA{R: 0x7f, G: 0x5f, B: 0xbf, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff},
}

// check reports what makes bc impossible to draw: no group, a row per
// series missing, a row of the wrong length, or no positive value at all.
func (bc barChart) check() error {
	if len(bc.Groups) == 0 || len(bc.Series) == 0 {
		return fmt.Errorf("chart %q: %d groups and %d series: nothing to draw", bc.Title, len(bc.Groups), len(bc.Series))
	}
	if len(bc.Values) != len(bc.Series) {
		return fmt.Errorf("chart %q: %d rows of values for %d series", bc.Title, len(bc.Values), len(bc.Series))
	}
	drawable := false
	for i, row := range bc.Values {
		if len(row) != len(bc.Groups) {
			return fmt.Errorf("chart %q: series %q has %d values for %d groups", bc.Title, bc.Series[i], len(row), len(bc.Groups))
		}
		for _, v := range row {
			drawable = drawable || v > 0
		}
	}
	if !drawable {
		return fmt.Errorf("chart %q: no positive value to draw on a log scale", bc.Title)
	}
	return nil
}

// plot builds the gonum plot of bc.
func (bc barChart) plot() (*plot.Plot, error) {
	if err := bc.check(); err != nil {
		return nil, err
	}
	p := plot.New()
	p.Title.Text = bc.Title
	p.Title.TextStyle.Font.Size = 11
	p.Y.Label.Text = "log scale"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = decades{bc.Format}
	p.X.Tick.Label.Font.Size = 8
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = 9
	p.Legend.Padding = vg.Points(2)

	// Bars of a group share 80% of its width; the legend takes the
	// series' bars as its thumbnails.
	width := vg.Points(min(60/float64(len(bc.Series)), 22))
	// Bar labels read upwards from the bar's top, so that neighbours'
	// labels never overlap.
	label := draw.TextStyle{
		Color:    color.Black,
		Font:     font.From(p.X.Tick.Label.Font, 7),
		Rotation: math.Pi / 2,
		XAlign:   text.XLeft,
		YAlign:   text.YCenter,
		Handler:  p.Title.TextStyle.Handler,
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, name := range bc.Series {
		b := &bars{
			values: bc.Values[i],
			width:  width,
			offset: (vg.Length(i) - vg.Length(len(bc.Series)-1)/2) * width,
			color:  colorOf(name, i),
			format: bc.Format,
			label:  label,
		}
		p.Add(b)
		p.Legend.Add(name, b)
		for _, v := range b.values {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if bc.Ref > 0 {
		p.Add(refLine{bc.Ref})
		lo, hi = min(lo, bc.Ref), max(hi, bc.Ref)
	}
	// Whole decades: below the shortest bar, so that it shows; above the
	// tallest, with room for its label and for the legend.
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo/3)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi*10)))
	p.NominalX(bc.Groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(bc.Groups))-0.5
	return p, nil
}

// colorOf picks series i's colour.
func colorOf(name string, i int) color.Color {
	if c, ok := seriesColors[name]; ok {
		return c
	}
	return fallbackColors[i%len(fallbackColors)]
}

// writeSVG draws the charts side by side, each width wide, into one SVG of
// that width times len(charts), and height high.
func writeSVG(w io.Writer, width, height vg.Length, charts ...barChart) error {
	plots := make([]*plot.Plot, len(charts))
	for i, bc := range charts {
		p, err := bc.plot()
		if err != nil {
			return err
		}
		plots[i] = p
	}
	canvas, err := draw.NewFormattedCanvas(width*vg.Length(len(plots)), height, "svg")
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	for i, c := range plot.Align([][]*plot.Plot{plots}, tiles, dc)[0] {
		plots[i].Draw(c)
	}
	_, err = canvas.WriteTo(w)
	return err
}

// bars draws one series of a barChart: a bar per positive value from the
// axis' bottom, its label above it.
type bars struct {
	values        []float64
	width, offset vg.Length
	color         color.Color
	format        func(float64) string
	label         draw.TextStyle
}

func (b *bars) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	bottom := trY(plt.Y.Min)
	for i, v := range b.values {
		if !(v > 0) {
			continue
		}
		x0 := trX(float64(i)) + b.offset - b.width/2
		top := trY(v)
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{
			{X: x0, Y: bottom}, {X: x0, Y: top}, {X: x0 + b.width, Y: top}, {X: x0 + b.width, Y: bottom},
		}))
		if b.format != nil {
			c.FillText(b.label, vg.Point{X: x0 + b.width/2, Y: top + vg.Points(2)}, b.format(v))
		}
	}
}

// DataRange covers the groups and the positive values (barChart.plot
// widens the value range to whole decades).
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, v := range b.values {
		if v > 0 {
			ymin, ymax = min(ymin, v), max(ymax, v)
		}
	}
	return 0, float64(len(b.values) - 1), ymin, ymax
}

func (b *bars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y},
	})
}

// decades marks a log axis: a labelled tick at each power of ten, minor
// ticks between.
type decades struct{ format func(float64) string }

func (d decades) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		if v >= lo && v <= hi {
			label := strconv.FormatFloat(v, 'g', -1, 64)
			if d.format != nil {
				label = d.format(v)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
		for i := 2.0; i < 10; i++ {
			if m := v * i; m >= lo && m <= hi {
				ticks = append(ticks, plot.Tick{Value: m})
			}
		}
	}
	return ticks
}

// refLine is a dashed line across the plot at value y.
type refLine struct{ y float64 }

func (r refLine) Plot(c draw.Canvas, plt *plot.Plot) {
	_, trY := plt.Transforms(&c)
	y := trY(r.y)
	c.StrokeLine2(draw.LineStyle{Color: color.Gray{Y: 0x40}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}},
		c.Min.X, y, c.Max.X, y)
}
