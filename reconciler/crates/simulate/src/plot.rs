//! `simulate --plot DIR`: a replay's [`Series`] as SVG charts (plotters'
//! SVG backend, no system fonts): `allocation.svg` (allocated and ready
//! GPUs over time), `queue-depth.svg` (pending jobs per top-level queue
//! over time) and `wait-cdf.svg` (the distribution of queueing delays per
//! leaf queue).

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::Series;

/// The charts' size in pixels.
const SIZE: (u32, u32) = (960, 540);

/// The most points of one wait-time CDF.
const MAX_CDF_POINTS: usize = 2_000;

/// Why the charts were not written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The directory could not be created.
    #[error("--plot {dir}: cannot create the directory: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A chart could not be written.
    #[error("--plot: cannot write {file}: {source}")]
    Write {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// plotters could not draw a chart.
    #[error("--plot: cannot draw {chart}: {why}")]
    Draw {
        /// The chart's file name.
        chart: &'static str,
        /// plotters' message.
        why: String,
    },
}

/// Writes the three charts of `series` into `dir` (created if missing);
/// returns their paths.
pub fn write_charts(dir: &Path, series: &Series) -> Result<Vec<PathBuf>, PlotError> {
    create_dir(dir)?;
    let charts: [(&'static str, String); 3] = [
        ("allocation.svg", allocation(series)?),
        ("queue-depth.svg", queue_depth(series)?),
        ("wait-cdf.svg", wait_cdf(series)?),
    ];
    let mut written = Vec::new();
    for (name, svg) in charts {
        let file = dir.join(name);
        std::fs::write(&file, svg).map_err(|source| PlotError::Write {
            file: file.clone(),
            source,
        })?;
        written.push(file);
    }
    Ok(written)
}

/// Creates `dir` (and its parents) if missing: called before a replay, so
/// a path that cannot hold the charts fails at once.
pub fn create_dir(dir: &Path) -> Result<(), PlotError> {
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Dir {
        dir: dir.to_path_buf(),
        source,
    })
}

/// One line of a chart: its label and points.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
}

/// Allocated and ready GPUs over time (hours).
fn allocation(s: &Series) -> Result<String, PlotError> {
    let hours: Vec<f64> = s.at_s.iter().map(|t| t / 3600.0).collect();
    let line = |label: &str, v: &[u64]| Line {
        label: label.to_string(),
        points: steps(&hours, v.iter().map(|g| *g as f64)),
    };
    draw(
        "allocation.svg",
        "GPU allocation over time",
        ("hours since the first arrival", "GPUs"),
        // Capacity first, so allocation is drawn over it where they meet.
        &[
            line("GPUs of ready nodes", &s.capacity),
            line("allocated GPUs", &s.allocated),
        ],
        SeriesLabelPosition::LowerLeft,
    )
}

/// Pending jobs per top-level queue over time (hours).
fn queue_depth(s: &Series) -> Result<String, PlotError> {
    let hours: Vec<f64> = s.at_s.iter().map(|t| t / 3600.0).collect();
    let lines: Vec<Line> = s
        .depth
        .iter()
        .map(|(queue, d)| Line {
            label: queue.clone(),
            points: steps(&hours, d.iter().map(|n| f64::from(*n))),
        })
        .collect();
    draw(
        "queue-depth.svg",
        "Pending jobs per top-level queue",
        ("hours since the first arrival", "pending jobs"),
        &lines,
        SeriesLabelPosition::UpperRight,
    )
}

/// The fraction of each leaf queue's jobs that waited at most x hours.
fn wait_cdf(s: &Series) -> Result<String, PlotError> {
    let lines: Vec<Line> = s
        .waits
        .iter()
        .map(|(queue, waits)| {
            let n = waits.len();
            let step = n.div_ceil(MAX_CDF_POINTS).max(1);
            let mut points: Vec<(f64, f64)> = (0..n)
                .step_by(step)
                .map(|i| (waits[i] / 3600.0, (i + 1) as f64 / n as f64))
                .collect();
            if let Some(last) = waits.last()
                && !(n - 1).is_multiple_of(step)
            {
                points.push((last / 3600.0, 1.0));
            }
            Line {
                label: queue.clone(),
                points,
            }
        })
        .collect();
    draw(
        "wait-cdf.svg",
        "Queueing delay (start − submit) per queue: CDF",
        ("wait, hours", "fraction of the queue's jobs"),
        &lines,
        SeriesLabelPosition::LowerRight,
    )
}

/// A step function: each value holds until the next instant.
fn steps(at: &[f64], values: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(at.len() * 2);
    let mut last: Option<f64> = None;
    for (t, v) in at.iter().zip(values) {
        if let Some(prev) = last {
            points.push((*t, prev));
        }
        points.push((*t, v));
        last = Some(v);
    }
    points
}

/// A line chart of `lines` as an SVG document.
fn draw(
    chart: &'static str,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    lines: &[Line],
    legend: SeriesLabelPosition,
) -> Result<String, PlotError> {
    let fail = |e: &dyn std::fmt::Display| PlotError::Draw {
        chart,
        why: e.to_string(),
    };
    let x = range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    let y = range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut c = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)
            .map_err(|e| fail(&e))?;
        c.configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| fail(&e))?;
        for (i, line) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            c.draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        if !lines.is_empty() {
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(legend)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

/// From 0 (or the least value, if negative) to the largest value, a
/// little headroom above; 0..1 when there is nothing.
fn range(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi - lo <= f64::EPSILON {
        return lo..lo + 1.0;
    }
    lo..hi + (hi - lo) * 0.05
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_functions_hold_each_value_until_the_next_instant() {
        let points = steps(&[0.0, 2.0, 5.0], [1.0, 3.0, 0.0].into_iter());
        assert_eq!(
            points,
            [(0.0, 1.0), (2.0, 1.0), (2.0, 3.0), (5.0, 3.0), (5.0, 0.0)]
        );
        assert_eq!(range(std::iter::empty()), 0.0..1.0);
        assert_eq!(range([2.0, 10.0].into_iter()), 0.0..10.5);
    }
}
