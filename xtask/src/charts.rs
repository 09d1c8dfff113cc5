//! SVG bar charts of a run's CSVs (plotters' SVG backend): one chart per shape (a mix at a
//! value size, thread count or pipeline depth; a hit-ratio workload at a capacity), one bar
//! per backend. `bench`, `bench-server` and `hitratio` draw them at the end of a run into
//! `<run>/charts/` and list them in `<run>/charts.md` (linked from the summaries);
//! `cargo xtask charts <run-dir>` draws them again from the CSVs. A run with fc-gpu's
//! `gpu-timeline.csv` also gets `charts/gpu-timeline.svg`: each piece's gather and copy on one
//! time axis, a row each per stream; and one with `gpu-store-timeline.csv` gets
//! `charts/gpu-store-timeline.svg`: each piece's copy to the host and the building of its
//! entries.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

/// One chart: a title, the unit of its values, one bar per backend.
struct Bars {
    title: String,
    unit: &'static str,
    bars: Vec<(String, f64)>,
}

/// Reads a CSV with a header into rows of (column → value).
fn read_csv(path: &Path) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    Ok(lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(h, v)| ((*h).to_string(), v.to_string()))
                .collect()
        })
        .collect())
}

/// Groups `rows` by the `key` columns into charts of `value` per `backend` column.
fn group(
    rows: &[BTreeMap<String, String>],
    key: &[&str],
    backend: &[&str],
    value: &str,
    unit: &'static str,
    title: impl Fn(&BTreeMap<String, String>) -> String,
) -> Vec<Bars> {
    let mut charts: BTreeMap<Vec<String>, Bars> = BTreeMap::new();
    for row in rows {
        let id: Vec<String> = key
            .iter()
            .map(|k| row.get(*k).cloned().unwrap_or_default())
            .collect();
        let Some(v) = row.get(value).and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let name = backend
            .iter()
            .filter_map(|b| row.get(*b))
            .filter(|v| !v.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        charts
            .entry(id)
            .or_insert_with(|| Bars {
                title: title(row),
                unit,
                bars: Vec::new(),
            })
            .bars
            .push((name, v));
    }
    charts.into_values().collect()
}

/// Draws one horizontal bar chart.
fn draw(path: &Path, chart: &Bars) -> anyhow::Result<()> {
    let n = chart.bars.len().max(1);
    let height = 90 + 30 * n as u32;
    let root = SVGBackend::new(path, (720, height)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let max = chart
        .bars
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.18;
    let names: Vec<String> = chart.bars.iter().map(|(n, _)| n.clone()).collect();
    let mut plot = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(170)
        .build_cartesian_2d(0f64..max, (0..n - 1).into_segmented())
        .map_err(|e| fail(&e))?;
    plot.configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc(chart.unit)
        .x_label_formatter(&|v| human(*v))
        .draw()
        .map_err(|e| fail(&e))?;
    plot.draw_series(chart.bars.iter().enumerate().map(|(i, (name, v))| {
        // fast-cache's own bars in one color, the peers in another.
        let color = if name.starts_with("fc") || name.starts_with("fast-cache") {
            RGBColor(31, 119, 180)
        } else {
            RGBColor(160, 160, 160)
        };
        Rectangle::new(
            [
                (0.0, SegmentValue::Exact(i)),
                (*v, SegmentValue::Exact(i + 1)),
            ],
            color.filled(),
        )
    }))
    .map_err(|e| fail(&e))?;
    plot.draw_series(chart.bars.iter().enumerate().map(|(i, (_, v))| {
        Text::new(
            human(*v),
            (*v, SegmentValue::CenterOf(i)),
            ("sans-serif", 12),
        )
    }))
    .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

/// Which traced transfer a timeline is.
#[derive(Clone, Copy)]
enum Traced {
    /// `gpu-timeline.csv`: pieces gathered out of the store, then copied to the device.
    Load,
    /// `gpu-store-timeline.csv`: pieces copied to the host, then built into entries (the
    /// CSV's `gather_*` columns).
    Store,
}

/// Draws fc-gpu's traced load or store: for each stream (lane), a row of the pieces' host
/// work (a load's gathers, a store's builds; host clock) and a row of their copies (CUDA
/// events), in microseconds.
fn draw_timeline(csv: &Path, path: &Path, traced: Traced) -> anyhow::Result<()> {
    let rows = read_csv(csv)?;
    let num = |r: &BTreeMap<String, String>, k: &str| -> f64 {
        r.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    let lanes = rows
        .iter()
        .map(|r| num(r, "lane") as usize + 1)
        .max()
        .unwrap_or(1);
    let end = rows
        .iter()
        .map(|r| num(r, "copy_end_us").max(num(r, "gather_end_us")))
        .fold(1.0f64, f64::max);
    let n = 2 * lanes;
    let root = SVGBackend::new(path, (960, 100 + 40 * n as u32)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let (host_work, caption, axis) = match traced {
        Traced::Load => (
            "gather",
            "fc-gpu load: each piece gathered (host) and copied (GPU)",
            "microseconds from the start of the load",
        ),
        Traced::Store => (
            "build",
            "fc-gpu store: each piece copied (GPU) and built into entries (host)",
            "microseconds from the start of the store",
        ),
    };
    let names: Vec<String> = (0..lanes)
        .flat_map(|l| {
            [
                format!("stream {l}: {host_work}"),
                format!("stream {l}: copy"),
            ]
        })
        .collect();
    let mut plot = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..end * 1.02, (0..n - 1).into_segmented())
        .map_err(|e| fail(&e))?;
    plot.configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc(axis)
        .draw()
        .map_err(|e| fail(&e))?;
    let bar = |row: usize, from: f64, to: f64, color: RGBColor| {
        Rectangle::new(
            [
                (from, SegmentValue::Exact(row)),
                (to.max(from), SegmentValue::Exact(row + 1)),
            ],
            ShapeStyle::from(color.mix(0.6)).filled(),
        )
    };
    plot.draw_series(rows.iter().flat_map(|r| {
        let lane = num(r, "lane") as usize;
        [
            bar(
                2 * lane,
                num(r, "gather_start_us"),
                num(r, "gather_end_us"),
                RGBColor(160, 160, 160),
            ),
            bar(
                2 * lane + 1,
                num(r, "copy_start_us"),
                num(r, "copy_end_us"),
                RGBColor(31, 119, 180),
            ),
        ]
    }))
    .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

/// `1.23M`, `45.6k`, `0.458`.
fn human(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// A file name from a chart's title.
fn file_name(prefix: &str, title: &str) -> String {
    let mut name = String::from(prefix);
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    name.trim_end_matches('-').to_string() + ".svg"
}

/// Draws every chart of the run in `dir` (from whichever of `embedded.csv`, `server.csv`
/// and `hitratio.csv` it has) into `dir/charts/`, writes `dir/charts.md` listing them, and
/// returns the files drawn.
pub(crate) fn for_run(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut charts: Vec<(&str, Bars)> = Vec::new();
    let embedded = dir.join("embedded.csv");
    if embedded.exists() {
        let rows = read_csv(&embedded)?;
        for chart in group(
            &rows,
            &[
                "threads",
                "value_bytes",
                "mix",
                "ttl",
                "eviction",
                "read_mode",
            ],
            &["backend"],
            "ops_per_sec",
            "operations per second",
            |r| {
                format!(
                    "embedded: {} {}B, {} thread(s), ttl {}, eviction {}, {}",
                    r["mix"],
                    r["value_bytes"],
                    r["threads"],
                    r["ttl"],
                    r["eviction"],
                    r["read_mode"]
                )
            },
        ) {
            charts.push(("embedded-", chart));
        }
    }
    let server = dir.join("server.csv");
    if server.exists() {
        let rows = read_csv(&server)?;
        for chart in group(
            &rows,
            &["value_bytes", "mix", "pipeline", "persistence"],
            &["server", "load"],
            "ops_per_sec",
            "operations per second",
            |r| {
                format!(
                    "server: {} {}B, pipeline {}, persistence {}",
                    r["mix"], r["value_bytes"], r["pipeline"], r["persistence"]
                )
            },
        ) {
            charts.push(("server-", chart));
        }
    }
    let hitratio = dir.join("hitratio.csv");
    if hitratio.exists() {
        let rows = read_csv(&hitratio)?;
        for chart in group(
            &rows,
            &["workload", "capacity_pct"],
            &["backend"],
            "hit_ratio",
            "hit ratio",
            |r| {
                format!(
                    "hit ratio: {}, capacity {}%",
                    r["workload"], r["capacity_pct"]
                )
            },
        ) {
            charts.push(("hitratio-", chart));
        }
    }
    let timelines: Vec<(PathBuf, &str, Traced, &str)> = [
        (
            "gpu-timeline",
            Traced::Load,
            "fc-gpu's traced load: gathers and copies over time",
        ),
        (
            "gpu-store-timeline",
            Traced::Store,
            "fc-gpu's traced store: copies and builds over time",
        ),
    ]
    .into_iter()
    .map(|(name, traced, alt)| (dir.join(format!("{name}.csv")), name, traced, alt))
    .filter(|(csv, ..)| csv.exists())
    .collect();
    if charts.is_empty() && timelines.is_empty() {
        return Ok(Vec::new());
    }
    let out = dir.join("charts");
    std::fs::create_dir_all(&out)?;
    let mut index = String::from(
        "# Charts\n\nOne chart per shape, a bar per backend (fast-cache's in blue).\n\n",
    );
    let mut drawn = Vec::new();
    for (csv, name, traced, alt) in timelines {
        let path = out.join(format!("{name}.svg"));
        draw_timeline(&csv, &path, traced)?;
        let _ = writeln!(index, "![{alt}](charts/{name}.svg)\n");
        drawn.push(path);
    }
    for (_, chart) in &charts {
        let name = file_name("", &chart.title);
        let path = out.join(&name);
        draw(&path, chart)?;
        let _ = writeln!(index, "![{}](charts/{name})\n", chart.title);
        drawn.push(path);
    }
    std::fs::write(dir.join("charts.md"), index)?;
    Ok(drawn)
}

/// Draws a run's charts and links them from `summary` (a Markdown file of the run), once.
pub(crate) fn draw_and_link(dir: &Path, summary: &Path) -> anyhow::Result<()> {
    let drawn = for_run(dir)?;
    if drawn.is_empty() {
        return Ok(());
    }
    let mut text = std::fs::read_to_string(summary).unwrap_or_default();
    if !text.contains("charts.md") {
        let _ = write!(
            text,
            "\n## Charts\n\n{} SVG charts (a bar per backend, one chart per shape): [charts.md](charts.md).\n",
            drawn.len()
        );
        std::fs::write(summary, text)?;
    }
    eprintln!(
        "charts: {} drawn in {}",
        drawn.len(),
        dir.join("charts").display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_timeline_is_drawn_with_a_row_per_stream_and_kind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gpu-timeline.csv"),
            "session,lane,host_start,bytes,gather_start_us,gather_end_us,issued_us,copy_start_us,copy_end_us\n0,0,0,1048576,1.0,60.0,61.0,62.0,80.0\n1,1,0,1048576,61.0,120.0,121.0,122.0,140.0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("gpu-store-timeline.csv"),
            "session,lane,host_start,bytes,gather_start_us,gather_end_us,issued_us,copy_start_us,copy_end_us\n0,0,0,2097152,50.0,90.0,1.0,2.0,45.0\n0,0,2097152,2097152,91.0,130.0,1.5,46.0,89.0\n",
        )
        .unwrap();
        let drawn = for_run(dir.path()).unwrap();
        assert_eq!(
            drawn,
            [
                dir.path().join("charts/gpu-timeline.svg"),
                dir.path().join("charts/gpu-store-timeline.svg")
            ]
        );
        let svg = std::fs::read_to_string(&drawn[0]).unwrap();
        for row in [
            "stream 0: gather",
            "stream 0: copy",
            "stream 1: gather",
            "stream 1: copy",
        ] {
            assert!(svg.contains(row), "{row} missing");
        }
        let svg = std::fs::read_to_string(&drawn[1]).unwrap();
        for row in ["stream 0: build", "stream 0: copy", "fc-gpu store"] {
            assert!(svg.contains(row), "{row} missing");
        }
        let index = std::fs::read_to_string(dir.path().join("charts.md")).unwrap();
        assert!(index.contains("gpu-timeline.svg") && index.contains("gpu-store-timeline.svg"));
    }

    #[test]
    fn a_run_gets_one_chart_per_shape_with_a_bar_per_backend() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("hitratio.csv"),
            "backend,workload,capacity_pct,requests,hit_ratio\nfc-s3fifo,zipf-0.9,1,100,0.45\nmoka,zipf-0.9,1,100,0.40\nfc-s3fifo,scan,10,100,0.2\n",
        )
        .unwrap();
        let summary = dir.path().join("summary.md");
        std::fs::write(&summary, "# run\n").unwrap();
        draw_and_link(dir.path(), &summary).unwrap();
        let charts: Vec<_> = std::fs::read_dir(dir.path().join("charts"))
            .unwrap()
            .collect();
        assert_eq!(charts.len(), 2);
        let svg =
            std::fs::read_to_string(dir.path().join("charts/hit-ratio-zipf-0-9-capacity-1.svg"))
                .unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("moka") && svg.contains("fc-s3fifo"));
        assert!(
            std::fs::read_to_string(&summary)
                .unwrap()
                .contains("charts.md")
        );
        // Linked once, however often it is drawn.
        draw_and_link(dir.path(), &summary).unwrap();
        assert_eq!(
            std::fs::read_to_string(&summary)
                .unwrap()
                .matches("## Charts")
                .count(),
            1
        );
    }
}
