//! Line charts as SVG, for `fit --plot` and `memcheck --plot`: panels stacked one above the other, each with its
//! own axes, series and legend, drawn by plotters into a string that the command then writes with its other
//! outputs (all or none). No font is loaded: the SVG backend writes text as `<text>` for the viewer to render,
//! and plotters' built-in estimate of a text's size lays it out, so drawing works on a machine without fonts.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// The size of one panel, in SVG pixels.
const PANEL_SIZE: (u32, u32) = (900, 380);
/// The most whole-number ticks an axis gets; beyond it plotters spaces them by round steps.
const MAX_WHOLE_TICKS: usize = 12;
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

/// An axis range around `values` that is never empty, so plotters has a scale to draw even for one point.
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut low, mut high) = values
        .filter(|value| value.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), value| {
            (low.min(value), high.max(value))
        });
    if !low.is_finite() {
        (low, high) = (0.0, 1.0);
    }
    if from_zero {
        low = low.min(0.0);
    }
    if high - low <= f64::EPSILON * high.abs().max(1.0) {
        high = low + 1.0;
    }
    // A margin above, so the highest point does not sit on the frame.
    (low, high + (high - low) * 0.05)
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
    let points = || panel.series.iter().flat_map(|series| series.points.iter());
    let x_range = span(points().map(|&(x, _)| x), false);
    let y_range = panel
        .y_range
        .unwrap_or_else(|| span(points().map(|&(_, y)| y), true));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)?;
    let whole = |x: &f64| format!("{x:.0}");
    let decimal = |x: &f64| format!("{x}");
    let mut mesh = chart.configure_mesh();
    if panel.whole_x {
        // One tick per whole number where they fit, so that no tick reads "1.5 epochs".
        let whole_numbers = (x_range.1.floor() - x_range.0.ceil()).max(0.0) as usize + 1;
        mesh.x_labels(whole_numbers.min(MAX_WHOLE_TICKS))
            .x_label_formatter(&whole);
    } else {
        mesh.x_label_formatter(&decimal);
    }
    mesh.x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (index, series) in panel.series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                series.points.iter().copied(),
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
            cell.parse::<f64>()
                .map_err(|_| anyhow!("line {row}: {cell:?} is not a number"))
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
    let outputs = crate::outputs::Outputs::plan(
        &[("--output".to_string(), &args.output)],
        &[("the CSV".to_string(), &args.csv)],
    )?;
    let text = std::fs::read_to_string(&args.csv)
        .map_err(|error| anyhow!("reading {}: {error}", args.csv.display()))?;
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
