//! The HTML report, rendered by a real browser: headless Chromium loads the failover scenario's
//! page from disk, runs its script, and the test checks the DOM it ends with (two client lanes,
//! the red overlap, the verdict) and saves a screenshot next to the test's output; then a
//! ZooKeeper and an etcd scenario's pages, which must draw a lane per server with its role and
//! faults.
//!
//! Chromium comes from the system packages (`apt-get install chromium`, which `.ci/run` does).
//! Without it the test fails and says so; `LOCKCHECK_SKIP_BROWSER=1` opts out explicitly.

use std::path::{Path, PathBuf};
use std::process::Command;

const OPT_OUT: &str = "LOCKCHECK_SKIP_BROWSER";

/// The Chromium binary, or a failure that says how to get one.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !p.is_empty() {
                return Some(PathBuf::from(p));
            }
        }
    }
    if std::env::var_os(OPT_OUT).is_some_and(|v| v == "1") {
        eprintln!("{OPT_OUT}=1: skipping the browser test (no chromium)");
        return None;
    }
    panic!(
        "the HTML report test needs Chromium: install it with `apt-get install chromium` \
         (.ci/run does), or set {OPT_OUT}=1 to skip this test explicitly"
    );
}

/// Runs headless Chromium on `url` with `args`; returns its stdout.
fn headless(bin: &Path, profile: &Path, args: &[String], url: &str) -> String {
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("start chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `name` in the first tag of `dom` that contains `marker`.
fn attr(dom: &str, marker: &str, name: &str) -> Option<f64> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let v = tag
        .split(&format!(" {name}=\""))
        .nth(1)?
        .split('"')
        .next()?;
    v.parse().ok()
}

#[test]
fn failover_report_renders_two_client_lanes_and_the_overlap_in_chromium() {
    let Some(bin) = chromium() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    let _ = std::fs::remove_dir_all(&dir);
    let report = dir.join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", "scenarios/failover-lock-loss.toml", "--report"])
        .arg(&report)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run lockcheck");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let page = report.join("failover-lock-loss.sim.html");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let profile = dir.join("profile");

    let dom = headless(&bin, &profile, &["--dump-dom".into()], &url);
    // The script ran: the lanes and the overlap exist only in the rendered DOM.
    assert!(dom.contains("data-rendered=\"true\""), "{dom}");
    assert_eq!(dom.matches("class=\"lane client\"").count(), 2, "{dom}");
    assert!(dom.contains("id=\"lane-client-0\""));
    assert!(dom.contains("id=\"lane-client-1\""));
    assert_eq!(dom.matches("class=\"lane node\"").count(), 2, "{dom}");
    assert_eq!(dom.matches("class=\"overlap\"").count(), 1, "{dom}");
    let x = attr(&dom, "id=\"overlap-0\"", "x").expect("the overlap has a position");
    let w = attr(&dom, "id=\"overlap-0\"", "width").expect("the overlap has a width");
    let h = attr(&dom, "id=\"overlap-0\"", "height").expect("the overlap has a height");
    assert!(
        x > 170.0 && w > 10.0,
        "the overlap is drawn: x={x} width={w}"
    );
    // It covers both client lanes: taller than one lane.
    let lane = attr(&dom, "class=\"lane-bg\"", "height").unwrap();
    assert!(
        h > lane,
        "overlap height {h} covers both lanes ({lane} each)"
    );
    assert!(
        dom.contains("VIOLATION (as expected: mutual_exclusion, resource violated)"),
        "verdict text"
    );
    assert!(dom.contains("class=\"span killed\""), "the killed master");
    assert!(dom.contains("class=\"fault-marker\""), "fault markers");

    let png = dir.join("failover-lock-loss.png");
    headless(
        &bin,
        &profile,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,1000".into(),
        ],
        &url,
    );
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        bytes.len() > 20_000,
        "a real picture, {} bytes",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
}

/// Reports `scenario` (a file under `scenarios/`, run in simulation) into `dir` and returns the
/// DOM Chromium renders of its page.
fn rendered(bin: &Path, dir: &Path, scenario: &str) -> String {
    let report = dir.join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", &format!("scenarios/{scenario}.toml"), "--report"])
        .arg(&report)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run lockcheck");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let page = report.join(format!("{scenario}.sim.html"));
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let dom = headless(bin, &dir.join("profile"), &["--dump-dom".into()], &url);
    assert!(dom.contains("data-rendered=\"true\""), "{dom}");
    dom
}

/// What the page draws for lane `name`: from its group to the next lane, or to what is drawn
/// across the lanes after the last one.
fn lane<'a>(dom: &'a str, name: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"lane-{name}\""))
        .unwrap_or_else(|| panic!("no lane {name}: {dom}"));
    let rest = &dom[at..];
    let end = [
        "<g class=\"lane ",
        "class=\"overlap\"",
        "class=\"fault-marker\"",
        "</svg>",
    ]
    .iter()
    .filter_map(|m| rest.find(m))
    .min()
    .unwrap_or(rest.len());
    &rest[..end]
}

/// Every server has a lane whatever the backend: the lone ZooKeeper server of CURATOR-206 serves
/// alone, is cut off from the holder and expires its session on its own lane; the etcd leader
/// crashes on its lane and another member's lane turns leader after the election.
#[test]
fn zookeeper_and_etcd_reports_draw_a_lane_per_server_with_its_role_and_faults() {
    let Some(bin) = chromium() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser-servers");
    let _ = std::fs::remove_dir_all(&dir);

    let dom = rendered(&bin, &dir, "zk-curator-206-partition");
    assert_eq!(dom.matches("class=\"lane node\"").count(), 1, "{dom}");
    assert_eq!(dom.matches("class=\"lane client\"").count(), 2, "{dom}");
    let zk = lane(&dom, "zookeeper-0");
    assert!(zk.contains("class=\"span standalone\""), "{zk}");
    assert!(zk.contains("class=\"span partitioned\""), "{zk}");
    assert!(zk.contains("class=\"mark expiry\""), "{zk}");
    assert!(
        zk.contains("expired session 0x"),
        "the expiry's title: {zk}"
    );
    let cut = attr(zk, "class=\"span partitioned\"", "x").unwrap();
    assert!(
        cut > 170.0,
        "drawn on the time axis, right of the names: {zk}"
    );
    assert_eq!(dom.matches("class=\"fault-marker\"").count(), 3, "{dom}");

    let dom = rendered(&bin, &dir, "etcd-lock-leader-failover");
    assert_eq!(dom.matches("class=\"lane node\"").count(), 3, "{dom}");
    let old = lane(&dom, "etcd-0");
    assert!(old.contains("class=\"span leader\""), "{old}");
    assert!(old.contains("class=\"span killed\""), "{old}");
    assert!(
        old.contains("etcd-0 crashed (it was the leader)"),
        "the crash's title: {old}"
    );
    let new = lane(&dom, "etcd-1");
    let follower = attr(new, "class=\"span follower\"", "x").expect("follows first");
    let leader = attr(new, "class=\"span leader\"", "x").expect("then leads");
    assert!(
        follower < leader,
        "follower at {follower}, leader at {leader}"
    );
    assert!(
        new.contains("etcd-1 elected leader"),
        "the election's title: {new}"
    );
    let other = lane(&dom, "etcd-2");
    assert!(other.contains("class=\"span follower\""), "{other}");
    assert!(!other.contains("class=\"span leader\""), "{other}");
    assert_eq!(dom.matches("class=\"fault-marker\"").count(), 2, "{dom}");
}
