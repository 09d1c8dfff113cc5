//! The GEO math (`fc_shard::geo`) against replies captured from redis-server 7.0.15.
//!
//! `fixtures/geo/redis7.txt` (written by `fixtures/geo/gen.py`) holds commands and the exact
//! RESP2 bytes Redis answered. This test replays them on a small model of a GEO sorted set built
//! only on the module's public API — scores from `encode`, `GEOPOS`/`GEOHASH`/`GEODIST` from
//! `decode`/`geohash_string`/`distance` and the formatters, searches from `search_ranges` +
//! `within` as the module documents — and requires byte-identical replies, which checks every
//! score bit for bit, every printed number, and the membership and order of every search.
//!
//! `GEO_FIXTURE=path cargo test -p fc-shard --test geo -- --ignored` replays another capture
//! (for example a large one from `gen.py PORT stress SEED POINTS SEARCHES`).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::ops::Bound;

use fc_shard::geo::{self, Shape, Unit};

/// A GEO sorted set: members by name, and (score, member) in sorted-set order (scores written by
/// GEOADD are never negative, so the bit pattern orders like the value).
#[derive(Default)]
struct GeoSet {
    scores: HashMap<Vec<u8>, f64>,
    ordered: BTreeSet<(u64, Vec<u8>)>,
}

impl GeoSet {
    /// `ZADD`: true when the member is new.
    fn add(&mut self, member: &[u8], score: f64) -> bool {
        let old = self.scores.insert(member.to_vec(), score);
        if let Some(old) = old {
            self.ordered.remove(&(old.to_bits(), member.to_vec()));
        }
        self.ordered.insert((score.to_bits(), member.to_vec()));
        old.is_none()
    }

    fn pos(&self, member: &[u8]) -> Option<(f64, f64)> {
        self.scores.get(member).map(|&s| geo::decode(s))
    }
}

/// One search match.
struct Hit {
    member: Vec<u8>,
    score: f64,
    dist_m: f64,
    lon: f64,
    lat: f64,
}

/// Redis's search: boxes in `search_ranges` order, members of each box in sorted-set order,
/// filtered by `within`; `any` stops as soon as that many matched.
fn scan(set: &GeoSet, lon: f64, lat: f64, shape: &Shape, any: Option<usize>) -> Vec<Hit> {
    let mut hits = Vec::new();
    let full = |hits: &Vec<Hit>| any.is_some_and(|n| hits.len() >= n);
    'boxes: for (min, max) in geo::search_ranges(lon, lat, shape) {
        if full(&hits) {
            break;
        }
        assert!(min < max && min >= 0.0, "range {min}..{max}");
        let range = (
            Bound::Included((min.to_bits(), Vec::new())),
            Bound::Excluded((max.to_bits(), Vec::new())),
        );
        for (bits, member) in set.ordered.range(range) {
            let score = f64::from_bits(*bits);
            let (plon, plat) = geo::decode(score);
            if let Some(dist_m) = geo::within(shape, lon, lat, plon, plat) {
                hits.push(Hit {
                    member: member.clone(),
                    score,
                    dist_m,
                    lon: plon,
                    lat: plat,
                });
            }
            if full(&hits) {
                break 'boxes;
            }
        }
    }
    hits
}

fn bulk(out: &mut String, s: &str) {
    write!(out, "${}\r\n{s}\r\n", s.len()).unwrap();
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s}"))
}

/// The search options shared by GEOSEARCH and GEORADIUS*.
#[derive(Default)]
struct Options {
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    asc: Option<bool>,
    count: Option<usize>,
    any: bool,
}

/// Runs a search and formats Redis's reply.
fn search_reply(set: &GeoSet, lon: f64, lat: f64, shape: &Shape, opts: &Options) -> String {
    let any = if opts.any { opts.count } else { None };
    let mut hits = scan(set, lon, lat, shape, any);
    // COUNT without ANY and without ASC/DESC sorts ascending.
    let asc = opts.asc.or(if opts.count.is_some() && !opts.any {
        Some(true)
    } else {
        None
    });
    let returned = opts.count.map_or(hits.len(), |n| n.min(hits.len()));
    if let Some(asc) = asc {
        geo::sort_by_distance(&mut hits, |h| h.dist_m, !asc, returned);
    }
    hits.truncate(returned);
    let conversion = shape.unit().to_meters();
    let extra =
        usize::from(opts.withdist) + usize::from(opts.withhash) + usize::from(opts.withcoord);
    let mut out = format!("*{}\r\n", hits.len());
    for hit in &hits {
        if extra > 0 {
            write!(out, "*{}\r\n", extra + 1).unwrap();
        }
        bulk(&mut out, std::str::from_utf8(&hit.member).unwrap());
        if opts.withdist {
            bulk(&mut out, &geo::format_dist(hit.dist_m / conversion));
        }
        if opts.withhash {
            write!(out, ":{}\r\n", hit.score as i64).unwrap();
        }
        if opts.withcoord {
            out.push_str("*2\r\n");
            bulk(&mut out, &geo::format_coord(hit.lon));
            bulk(&mut out, &geo::format_coord(hit.lat));
        }
    }
    out
}

fn unit(arg: &str) -> Result<Unit, String> {
    Unit::parse(arg.as_bytes()).map_err(|e| format!("-{e}\r\n"))
}

/// Parses search options from `args`, filling `center` / `shape` for GEOSEARCH's FROM/BY.
fn parse_options(
    set: &GeoSet,
    args: &[&str],
    center: &mut Option<(f64, f64)>,
    shape: &mut Option<Shape>,
) -> Result<Options, String> {
    let mut opts = Options::default();
    let mut i = 0;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_str() {
            "WITHDIST" => opts.withdist = true,
            "WITHHASH" => opts.withhash = true,
            "WITHCOORD" => opts.withcoord = true,
            "ASC" => opts.asc = Some(true),
            "DESC" => opts.asc = Some(false),
            "ANY" => opts.any = true,
            "COUNT" => {
                opts.count = Some(args[i + 1].parse().unwrap());
                i += 1;
            }
            "FROMMEMBER" => {
                *center =
                    Some(set.pos(args[i + 1].as_bytes()).ok_or_else(|| {
                        "-ERR could not decode requested zset member\r\n".to_owned()
                    })?);
                i += 1;
            }
            "FROMLONLAT" => {
                let (lon, lat) = (num(args[i + 1]), num(args[i + 2]));
                geo::validate(lon, lat).map_err(|e| format!("-{e}\r\n"))?;
                *center = Some((lon, lat));
                i += 2;
            }
            "BYRADIUS" => {
                *shape = Some(Shape::Radius {
                    radius: num(args[i + 1]),
                    unit: unit(args[i + 2])?,
                });
                i += 2;
            }
            "BYBOX" => {
                *shape = Some(Shape::Box {
                    width: num(args[i + 1]),
                    height: num(args[i + 2]),
                    unit: unit(args[i + 3])?,
                });
                i += 3;
            }
            other => panic!("option {other} not modelled"),
        }
        i += 1;
    }
    Ok(opts)
}

/// Executes one command on the model and returns the RESP2 reply Redis would send.
fn execute(sets: &mut HashMap<String, GeoSet>, args: &[&str]) -> String {
    let cmd = args[0].to_ascii_uppercase();
    let key = args[1].to_owned();
    if cmd == "DEL" {
        return format!(":{}\r\n", u8::from(sets.remove(&key).is_some()));
    }
    let set = sets.entry(key.clone()).or_default();
    let reply = match cmd.as_str() {
        "GEOADD" => {
            let mut added = 0;
            let mut points = Vec::new();
            for triple in args[2..].chunks(3) {
                let (lon, lat) = (num(triple[0]), num(triple[1]));
                if let Err(e) = geo::validate(lon, lat) {
                    return format!("-{e}\r\n");
                }
                points.push((geo::encode(lon, lat), triple[2]));
            }
            for (score, member) in points {
                added += u32::from(set.add(member.as_bytes(), score));
            }
            format!(":{added}\r\n")
        }
        "ZSCORE" => match set.scores.get(args[2].as_bytes()) {
            // GEO scores are integers, which Redis prints in full.
            Some(&score) => {
                let mut out = String::new();
                bulk(&mut out, &format!("{}", score as u64));
                out
            }
            None => "$-1\r\n".to_owned(),
        },
        "GEOPOS" => {
            let mut out = format!("*{}\r\n", args.len() - 2);
            for member in &args[2..] {
                match set.pos(member.as_bytes()) {
                    Some((lon, lat)) => {
                        out.push_str("*2\r\n");
                        bulk(&mut out, &geo::format_coord(lon));
                        bulk(&mut out, &geo::format_coord(lat));
                    }
                    None => out.push_str("*-1\r\n"),
                }
            }
            out
        }
        "GEOHASH" => {
            let mut out = format!("*{}\r\n", args.len() - 2);
            for member in &args[2..] {
                match set.scores.get(member.as_bytes()) {
                    Some(&score) => {
                        bulk(
                            &mut out,
                            std::str::from_utf8(&geo::geohash_string(score)).unwrap(),
                        );
                    }
                    None => out.push_str("$-1\r\n"),
                }
            }
            out
        }
        "GEODIST" => {
            let to_meters = match args.get(4) {
                Some(u) => match unit(u) {
                    Ok(u) => u.to_meters(),
                    Err(e) => return e,
                },
                None => 1.0,
            };
            match (set.pos(args[2].as_bytes()), set.pos(args[3].as_bytes())) {
                (Some((lon1, lat1)), Some((lon2, lat2))) => {
                    let mut out = String::new();
                    bulk(
                        &mut out,
                        &geo::format_dist(geo::distance(lon1, lat1, lon2, lat2) / to_meters),
                    );
                    out
                }
                _ => "$-1\r\n".to_owned(),
            }
        }
        "GEOSEARCH" => {
            let (mut center, mut shape) = (None, None);
            match parse_options(set, &args[2..], &mut center, &mut shape) {
                Ok(opts) => {
                    let (lon, lat) = center.unwrap();
                    search_reply(set, lon, lat, &shape.unwrap(), &opts)
                }
                Err(e) => e,
            }
        }
        "GEORADIUS" | "GEORADIUSBYMEMBER" => {
            let (center, rest) = if cmd == "GEORADIUS" {
                let (lon, lat) = (num(args[2]), num(args[3]));
                if let Err(e) = geo::validate(lon, lat) {
                    return format!("-{e}\r\n");
                }
                ((lon, lat), &args[4..])
            } else {
                match set.pos(args[2].as_bytes()) {
                    Some(c) => (c, &args[3..]),
                    None => return "-ERR could not decode requested zset member\r\n".to_owned(),
                }
            };
            let shape = match unit(rest[1]) {
                Ok(unit) => Shape::Radius {
                    radius: num(rest[0]),
                    unit,
                },
                Err(e) => return e,
            };
            match parse_options(set, &rest[2..], &mut None, &mut None) {
                Ok(opts) => search_reply(set, center.0, center.1, &shape, &opts),
                Err(e) => e,
            }
        }
        other => panic!("command {other} not modelled"),
    };
    if set.scores.is_empty() {
        sets.remove(&key);
    }
    reply
}

/// Replays a capture; returns the number of commands checked.
fn replay(text: &str) -> usize {
    let mut sets = HashMap::new();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (command, expected) = line.split_once('\t').expect("COMMAND<TAB>REPLY");
        let expected = expected.replace("\\r\\n", "\r\n");
        let args: Vec<&str> = command.split(' ').collect();
        let got = execute(&mut sets, &args);
        if got != expected {
            failures.push(format!(
                "line {}: {command}\n  redis: {expected:?}\n  model: {got:?}",
                n + 1
            ));
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} replies differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    checked
}

#[test]
fn replies_match_redis_7_0() {
    let checked = replay(include_str!("fixtures/geo/redis7.txt"));
    assert!(checked > 250, "only {checked} commands");
}

#[test]
#[ignore = "needs GEO_FIXTURE=path to a capture from fixtures/geo/gen.py"]
fn replies_match_external_capture() {
    let path = std::env::var("GEO_FIXTURE").expect("GEO_FIXTURE");
    let text = std::fs::read_to_string(&path).expect("readable capture");
    let checked = replay(&text);
    eprintln!("{checked} commands from {path} match");
}

#[test]
fn scores_are_52_bit_interleaved_geohashes() {
    // Redis's documented example: Palermo's score.
    assert_eq!(geo::encode(13.361389, 38.115556), 3_479_099_956_230_698.0);
    assert_eq!(geo::hash(13.361389, 38.115556), 3_479_099_956_230_698);
    assert_eq!(geo::hash(-180.0, geo::LAT_MIN), 0);
    assert!(geo::hash(179.9999, 85.05) < 1 << 52);
    // The maxima spill past 52 bits, as in Redis.
    assert_eq!(geo::hash(180.0, 0.0) >> 52, 2);
    assert_eq!(
        &geo::geohash_string(geo::encode(13.361389, 38.115556)),
        b"sqc8b49rny0"
    );
}

#[test]
fn decode_is_the_cell_centre_clamped() {
    let (lon, lat) = geo::decode(geo::encode(13.361389, 38.115556));
    assert_eq!(geo::format_coord(lon), "13.36138933897018433");
    assert_eq!(geo::format_coord(lat), "38.11555639549629859");
    assert_eq!(
        geo::decode(geo::encode(180.0, geo::LAT_MAX)),
        (180.0, geo::LAT_MAX)
    );
}

#[test]
fn invalid_coordinates_are_reported_like_redis() {
    assert_eq!(
        geo::validate(12.0, 100.0).unwrap_err(),
        "ERR invalid longitude,latitude pair 12.000000,100.000000"
    );
    assert_eq!(
        geo::validate(f64::INFINITY, -85.06).unwrap_err(),
        "ERR invalid longitude,latitude pair inf,-85.060000"
    );
    assert!(geo::validate(-180.0, geo::LAT_MIN).is_ok());
    assert!(geo::validate(180.0, geo::LAT_MAX).is_ok());
    assert!(geo::validate(180.000_000_1, 0.0).is_err());
}

#[test]
fn units_parse_case_insensitively() {
    assert_eq!(Unit::parse(b"KM"), Ok(Unit::Km));
    assert_eq!(Unit::parse(b"mI"), Ok(Unit::Mi));
    assert_eq!(Unit::parse(b"ft").map(Unit::to_meters), Ok(0.3048));
    assert_eq!(Unit::parse(b"yd"), Err(geo::UNIT_ERROR));
    assert_eq!(
        geo::UNIT_ERROR,
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
}

#[test]
fn huge_radii_scan_each_box_once() {
    // Step 1: the centre and its 3 distinct neighbours (the repeats are dropped).
    let ranges = geo::search_ranges(
        0.0,
        0.0,
        &Shape::Radius {
            radius: 20_000.0,
            unit: Unit::Km,
        },
    );
    assert_eq!(ranges.len(), 4);
    let mut sorted: Vec<_> = ranges.iter().map(|r| r.0.to_bits()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 4);
}
