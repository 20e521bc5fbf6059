//! Line charts as SVG, for `fit --plot` and `memcheck --plot`: panels stacked one above the other, each with its
//! own axes, series and legend, drawn by plotters into a string that the command then writes with its other
//! outputs (all or none). No font is loaded: the SVG backend writes text as `<text>` for the viewer to render,
//! and plotters' built-in estimate of a text's size lays it out, so drawing works on a machine without fonts.

use std::io::Read as _;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// The size of one panel, in SVG pixels.
const PANEL_SIZE: (u32, u32) = (900, 380);
/// The most ticks an axis gets: whole-number ticks (for counts such as epochs), and any others.
const MAX_WHOLE_TICKS: usize = 12;
const MAX_TICKS: usize = 10;
/// How far a value may be from 0 and still be drawn as it is: beyond it, an axis is drawn in hundredths of its
/// values, so that its span, its margin and the widening of a single value stay within f64's range (values
/// of ±1e308 span 2e308, which is not a finite f64). Its labels show the values themselves.
const LARGEST_UNSCALED: f64 = f64::MAX / 100.0;
/// Distinct colours that stay apart for readers with the common colour-vision deficiencies (Okabe and Ito's
/// palette), in the order series take them.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

/// One line: its legend entry and its points, in drawing order.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title, axis descriptions, and its series. `y_range` fixes the vertical axis (accuracy from 0
/// to 100); otherwise it spans the points, from 0.
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Whether x counts whole things (epochs, cycles): ticks then fall on whole numbers only.
    pub whole_x: bool,
    pub series: Vec<Series>,
    pub y_range: Option<(f64, f64)>,
}

/// One axis as drawn: its range and ticks in drawn units, which are its values times `scale` (1, or 1/100 for
/// values near f64's limits), and the step between its ticks.
#[derive(Clone)]
struct Axis {
    low: f64,
    high: f64,
    scale: f64,
    ticks: Vec<f64>,
    step: f64,
}

impl Axis {
    /// The axis spanning the finite ones of `values` (from 0 with `from_zero`), or `fixed` where that is given
    /// and is a finite, non-empty range. Never empty, so that there is a scale to draw even for one point, and
    /// always finite.
    fn new(
        values: impl Iterator<Item = f64>,
        from_zero: bool,
        fixed: Option<(f64, f64)>,
        whole: bool,
    ) -> Axis {
        let fixed = fixed.filter(|&(low, high)| low.is_finite() && high.is_finite() && low < high);
        let (mut low, mut high) = fixed.unwrap_or_else(|| {
            let (low, high) = values
                .filter(|value| value.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), value| {
                    (low.min(value), high.max(value))
                });
            match (low.is_finite(), from_zero) {
                (false, _) => (0.0, 1.0),
                (true, true) => (low.min(0.0), high.max(0.0)),
                (true, false) => (low, high),
            }
        });
        let scale = if low.abs().max(high.abs()) > LARGEST_UNSCALED {
            0.01
        } else {
            1.0
        };
        (low, high) = (low * scale, high * scale);
        if fixed.is_none() {
            // A single value (or values too close to tell apart) gets a span around it, of at least 1; a
            // margin above, so that the highest point does not sit on the frame. Both stay finite: |low| and
            // |high| are at most f64::MAX / 100 here.
            if high - low <= f64::EPSILON * high.abs().max(low.abs()).max(1.0) {
                high = low + (low.abs() / 8.0).max(1.0);
            }
            high += (high - low) * 0.05;
        }
        let most = if whole { MAX_WHOLE_TICKS } else { MAX_TICKS };
        // Whole numbers stay whole when scaled only by 1; a scaled axis's values are all far beyond 1e300.
        let (ticks, step) = ticks(low, high, most, whole && scale == 1.0);
        Axis {
            low,
            high,
            scale,
            ticks,
            step,
        }
    }

    /// A drawn value as its tick label reads: the value itself, to the precision the tick step needs.
    fn label(&self, drawn: f64) -> String {
        tick_label(drawn / self.scale, self.step / self.scale)
    }
}

/// The axis as plotters draws it: placed as a plain f64 range is, with the ticks computed here (`ticks`)
/// rather than by plotters, whose own search for them does not end on a range as wide as f64's.
impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.low..self.high).map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light mesh lines are not drawn; the bold ones are the ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.low..self.high
    }
}

/// At most `most` + 1 round values from `low` to `high`, `step` apart, a step being 1, 2 or 5 times a power of
/// ten (and at least 1 with `whole`, so that every tick is a whole number); and the step. No ticks for a range
/// that is not finite and increasing, or too narrow for a step to be found; every loop is bounded by a count.
fn ticks(low: f64, high: f64, most: usize, whole: bool) -> (Vec<f64>, f64) {
    let width = high - low;
    if most == 0 || !(width.is_finite() && width > 0.0) {
        return (Vec::new(), 0.0);
    }
    let rough = width / most as f64;
    // 10 to a whole power from -324 to 308 (or 0 where `rough` is 0 or subnormal), as log10 of a positive
    // finite number is finite.
    let power = 10f64.powi(rough.log10().floor().clamp(-400.0, 400.0) as i32);
    if !(power.is_finite() && power > 0.0) {
        return (Vec::new(), 0.0);
    }
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|multiple| multiple * power)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * power);
    if whole {
        step = step.max(1.0);
    }
    if !(step.is_finite() && step > 0.0) {
        return (Vec::new(), 0.0);
    }
    // Each tick is a whole multiple of the step, computed from its multiple rather than by adding steps, so
    // that rounding neither drifts nor stalls.
    // A tick a hair outside the range (by rounding, as in scaling -1e308 by 1/100) is still drawn, at its edge.
    let slack = 1e-9;
    let first = (low / step - slack).ceil();
    let mut ticks: Vec<f64> = Vec::with_capacity(most + 1);
    for index in 0..=most {
        let tick = (first + index as f64) * step;
        if !tick.is_finite() || tick > high + step * slack {
            break;
        }
        if ticks.last().is_some_and(|&last| last >= tick) {
            // Too far from 0 for the step to change the value: no further tick would differ.
            break;
        }
        ticks.push(tick);
    }
    (ticks, step)
}

/// A tick's label: fixed-point with as many decimals as `step` needs, or, for values of a million or more
/// (or under 1e-4), in scientific notation with as many digits as tell ticks `step` apart. Never a
/// hundreds-of-digits number for 1e300.
fn tick_label(value: f64, step: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        // -0 reads as 0; a value beyond f64 (the edge of a scaled axis) is not labelled.
        return if value == 0.0 {
            "0".to_string()
        } else {
            String::new()
        };
    }
    let step_power = if step.is_finite() && step > 0.0 {
        step.log10().floor()
    } else {
        0.0
    };
    let magnitude = value.abs();
    if !(1e-4..1e6).contains(&magnitude) {
        let digits = (magnitude.log10().floor() - step_power).clamp(0.0, 16.0) as usize;
        format!("{value:.digits$e}")
    } else {
        let decimals = (-step_power).clamp(0.0, 16.0) as usize;
        format!("{value:.decimals$}")
    }
}

/// The panels as one SVG document.
pub fn svg(panels: &[Panel]) -> Result<String> {
    let mut document = String::new();
    let height = PANEL_SIZE.1 * panels.len().max(1) as u32;
    {
        let drawing = |error: String| anyhow!("drawing the plot: {error}");
        let root =
            SVGBackend::with_string(&mut document, (PANEL_SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|error| drawing(error.to_string()))?;
        for (area, panel) in root
            .split_evenly((panels.len().max(1), 1))
            .iter()
            .zip(panels)
        {
            draw_panel(area, panel).map_err(|error| drawing(error.to_string()))?;
        }
        root.present().map_err(|error| drawing(error.to_string()))?;
    }
    Ok(document)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_panel(
    area: &Area<'_>,
    panel: &Panel,
) -> std::result::Result<(), DrawingAreaErrorKind<std::io::Error>> {
    // Points with a coordinate that is not a finite number cannot be placed; they are left out.
    let points = || {
        panel
            .series
            .iter()
            .flat_map(|series| series.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    let x_axis = Axis::new(points().map(|&(x, _)| x), false, None, panel.whole_x);
    let y_axis = Axis::new(points().map(|&(_, y)| y), true, panel.y_range, false);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_axis.clone(), y_axis.clone())?;
    let x_label = |x: &f64| x_axis.label(*x);
    let y_label = |y: &f64| y_axis.label(*y);
    chart
        .configure_mesh()
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (index, series) in panel.series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                series
                    .points
                    .iter()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .map(|&(x, y)| (x * x_axis.scale, y * y_axis.scale)),
                colour.stroke_width(2),
            ))?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    if !panel.series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range, however extreme or degenerate, gives at most `most` + 1 increasing ticks inside it, and
    /// returns (rather than looping) where there is nothing to tick.
    #[test]
    fn ticks_are_bounded_increasing_and_inside_the_range() {
        let ranges = [
            (0.0, 1.0),
            (-1e306, 1e306),
            (-f64::MAX, f64::MAX),
            (f64::MAX / 2.0, f64::MAX),
            (1e20, 1e20 + 1e5),
            (0.0, 5e-324),
            (1.0, 1.0),
            (1.0, 0.0),
            (f64::NEG_INFINITY, f64::INFINITY),
            (f64::NAN, 1.0),
            (0.1, 0.7),
        ];
        for (low, high) in ranges {
            for whole in [false, true] {
                let (ticks, _) = ticks(low, high, 10, whole);
                assert!(ticks.len() <= 11, "{low}..{high}: {ticks:?}");
                assert!(
                    ticks.windows(2).all(|pair| pair[0] < pair[1]),
                    "{low}..{high}: {ticks:?}"
                );
                assert!(
                    ticks.iter().all(|tick| tick.is_finite()),
                    "{low}..{high}: {ticks:?}"
                );
                if whole {
                    assert!(ticks.iter().all(|tick| tick.fract() == 0.0), "{ticks:?}");
                }
            }
        }
        assert_eq!(ticks(0.0, 1.0, 10, false).0.len(), 11);
        assert_eq!(ticks(0.5, 3.2, 12, true).0, [1.0, 2.0, 3.0]);
        assert_eq!(tick_label(3.0 * 0.1, 0.1), "0.3");
        assert_eq!(tick_label(1e308, 5e307), "1.0e308");
        assert_eq!(tick_label(-0.0, 1.0), "0");
    }

    #[test]
    fn a_panel_of_one_point_and_one_of_none_still_draw() {
        let panels = [
            Panel {
                title: "one".to_string(),
                x_label: "x".to_string(),
                y_label: "y".to_string(),
                whole_x: true,
                series: vec![Series {
                    name: "single".to_string(),
                    points: vec![(1.0, 0.5)],
                }],
                y_range: None,
            },
            Panel {
                title: "none".to_string(),
                x_label: "x".to_string(),
                y_label: "y".to_string(),
                whole_x: true,
                series: Vec::new(),
                y_range: Some((0.0, 100.0)),
            },
        ];
        let document = svg(&panels).expect("drawn");
        assert!(document.starts_with("<svg"), "{document}");
        assert!(document.contains("single") && document.contains("<polyline"));
    }
}

/// `wgcompute plot`: series from a CSV file drawn as one SVG line chart.
#[derive(clap::Args)]
pub struct PlotArgs {
    /// A CSV file: a header row (the x axis's name, then one name per series) and rows of numbers, x first.
    /// An empty cell leaves that series without a point at that x.
    pub csv: std::path::PathBuf,
    /// Where the SVG goes (written whole, or not at all).
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    #[arg(long, default_value = "")]
    pub title: String,
    /// The vertical axis's description.
    #[arg(long, default_value = "")]
    pub y_label: String,
}

/// The largest CSV file `plot` reads. A chart of a million points is already far more than an SVG viewer
/// wants, and this is 64 times that.
pub const MAX_CSV_BYTES: u64 = 64 << 20;

/// The text of the CSV file at `path`, read as [`read_text`] reads, at most [`MAX_CSV_BYTES`].
pub fn read_csv(path: &std::path::Path) -> Result<String> {
    read_text(path, "plot reads a CSV file", "CSV files", MAX_CSV_BYTES)
}

/// The text of the file at `path`, read as untrusted input is (as the library reads a checkpoint): a regular
/// file only (a link to one is followed), opened without blocking (a FIFO cannot make the open wait), judged
/// again as opened, and never more than `limit` bytes (a whole number of MiB) of it read. `reads` says what the command reads (for a
/// path that is no file), `files` what is refused past the limit.
pub fn read_text(path: &std::path::Path, reads: &str, files: &str, limit: u64) -> Result<String> {
    let name = path.display();
    let not_regular = |metadata: &std::fs::Metadata| -> Result<()> {
        if metadata.is_file() {
            return Ok(());
        }
        Err(anyhow!(
            "cannot read {name}: it is {}, not a regular file; {reads}",
            wgcompute::file_kind(&metadata.file_type())
        ))
    };
    let too_large = |holds: String| {
        anyhow!(
            "cannot read {name}: it holds {holds}; {files} over {} MiB ({limit} bytes) are refused",
            limit >> 20
        )
    };
    // Looked at before opening, so that what is plainly not a file (a device) is never opened.
    let looked_at =
        std::fs::metadata(path).map_err(|error| anyhow!("cannot read {name}: {error}"))?;
    not_regular(&looked_at)?;
    let file =
        open_without_blocking(path).map_err(|error| anyhow!("cannot read {name}: {error}"))?;
    // The path may have been replaced since it was looked at: the file as opened decides.
    let opened = file
        .metadata()
        .map_err(|error| anyhow!("cannot read {name}: {error}"))?;
    not_regular(&opened)?;
    if opened.len() > limit {
        return Err(too_large(format!("{} bytes", opened.len())));
    }
    let mut bytes = Vec::new();
    // One byte past the limit, to find out whether the file grew past it after it was opened.
    std::io::Read::take(file, limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| anyhow!("cannot read {name}: {error}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(format!("more than {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|error| {
        anyhow!(
            "cannot read {name}: it is not UTF-8 text (an invalid byte at offset {})",
            error.utf8_error().valid_up_to()
        )
    })
}

/// O_NONBLOCK, because opening a FIFO for reading otherwise waits for a writer (a FIFO is then refused as
/// opened); it changes nothing for a regular file. O_NOCTTY, so that a terminal swapped in does not become the
/// process's controlling terminal.
#[cfg(unix)]
fn open_without_blocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_blocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// The series of a CSV file as [`PlotArgs::csv`] describes it: the x axis's name and the series.
pub fn read_series(text: &str) -> Result<(String, Vec<Series>)> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| anyhow!("the CSV file is empty"))?;
    let mut names = header.split(',').map(|name| name.trim().to_string());
    let x_name = names.next().unwrap_or_default();
    let mut series: Vec<Series> = names
        .map(|name| Series {
            name,
            points: Vec::new(),
        })
        .collect();
    if series.is_empty() {
        return Err(anyhow!("the header names the x axis but no series"));
    }
    for (index, line) in lines.enumerate() {
        let row = index + 2;
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != series.len() + 1 {
            return Err(anyhow!(
                "line {row} has {} cells; the header has {}",
                cells.len(),
                series.len() + 1
            ));
        }
        let number = |cell: &str| -> Result<f64> {
            let value = cell
                .parse::<f64>()
                .map_err(|_| anyhow!("line {row}: {cell:?} is not a number"))?;
            if !value.is_finite() {
                return Err(anyhow!(
                    "line {row}: {cell:?} is not a finite number, which a chart cannot place; leave the cell \
                     empty for no point"
                ));
            }
            Ok(value)
        };
        let x = number(cells[0])?;
        for (line_series, cell) in series.iter_mut().zip(&cells[1..]) {
            if !cell.is_empty() {
                line_series.points.push((x, number(cell)?));
            }
        }
    }
    Ok((x_name, series))
}

pub fn run(args: &PlotArgs) -> Result<()> {
    let outputs = crate::outputs::plan(
        &[("--output".to_string(), &args.output)],
        &[("the CSV".to_string(), &args.csv)],
    )?;
    let text = read_csv(&args.csv)?;
    let (x_label, series) = read_series(&text)?;
    let whole_x = series
        .iter()
        .flat_map(|line| &line.points)
        .all(|(x, _)| x.fract() == 0.0);
    let document = svg(&[Panel {
        title: args.title.clone(),
        x_label,
        y_label: args.y_label.clone(),
        whole_x,
        series,
        y_range: None,
    }])?;
    outputs.write(&[document.into_bytes()])?;
    Ok(())
}
