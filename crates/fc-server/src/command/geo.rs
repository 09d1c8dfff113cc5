//! GEO: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUSBYMEMBER and their `_RO` forms, over sorted sets whose scores are Redis's 52-bit
//! geohashes (`fc_shard::geo` has the math: scores, distances, the boxes a search scans and the
//! order of its results, all as Redis computes them).
//!
//! Arguments are checked in Redis's order (`georadiusGeneric`): the source's type, the centre
//! and radius of the `GEORADIUS*` forms, the options one by one (`FROMMEMBER` reads the member
//! as it is met), then the STORE conflicts, the missing `FROM`/`BY`, `ANY` without `COUNT`, and
//! only then a missing source. A search that stores its result (`STORE`, `STOREDIST`,
//! `GEOSEARCHSTORE`) into a key on another shard runs its search here and is stored by
//! `crate::multi` ([`export`]).

use fc_shard::geo::{self, Shape, Unit};
use fc_shard::{ScoreBound, ScoredVisitor, ZAddOptions, ZRange};

use super::{Ctx, parse_float};
use crate::reply::Reply;

/// Which GEO search command, as Redis's `georadiusGeneric` flags tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GeoCommand {
    /// `GEORADIUS key lon lat radius unit ...` (`ro`: the `_RO` form, no STORE).
    Radius { ro: bool },
    /// `GEORADIUSBYMEMBER key member radius unit ...`.
    ByMember { ro: bool },
    /// `GEOSEARCH key FROM... BY... ...`.
    Search,
    /// `GEOSEARCHSTORE dest src FROM... BY... ... [STOREDIST]`.
    SearchStore,
}

impl GeoCommand {
    /// The index of the source key.
    fn source(self) -> usize {
        if self == Self::SearchStore { 2 } else { 1 }
    }

    fn code(self) -> &'static [u8] {
        match self {
            Self::Radius { ro: false } => b"georadius",
            Self::Radius { ro: true } => b"georadius_ro",
            Self::ByMember { ro: false } => b"georadiusbymember",
            Self::ByMember { ro: true } => b"georadiusbymember_ro",
            Self::Search => b"geosearch",
            Self::SearchStore => b"geosearchstore",
        }
    }

    /// The search a command name names (any case).
    pub(crate) fn of(name: &[u8]) -> Option<Self> {
        [
            Self::Radius { ro: false },
            Self::Radius { ro: true },
            Self::ByMember { ro: false },
            Self::ByMember { ro: true },
            Self::Search,
            Self::SearchStore,
        ]
        .into_iter()
        .find(|s| name.eq_ignore_ascii_case(s.code()))
    }

    fn is_search(self) -> bool {
        matches!(self, Self::Search | Self::SearchStore)
    }
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`.
pub(super) fn geoadd<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut options = ZAddOptions::default();
    let mut i = 2;
    while i < ctx.args.len() {
        match ctx.args[i].to_ascii_lowercase().as_slice() {
            b"nx" => options.only_new = true,
            b"xx" => options.only_existing = true,
            b"ch" => options.changed = true,
            _ => break,
        }
        i += 1;
    }
    let rest = &ctx.args[i..];
    if !rest.len().is_multiple_of(3) || (options.only_new && options.only_existing) {
        return ctx.syntax_error();
    }
    let mut entries = Vec::with_capacity(rest.len() / 3);
    for triple in rest.chunks(3) {
        let Some((lon, lat)) = lon_lat(ctx.out, &triple[0], &triple[1]) else {
            return;
        };
        entries.push((geo::encode(lon, lat), &triple[2][..]));
    }
    let r = ctx.store.zadd(&ctx.args[1], &entries, options);
    ctx.reply(r, |out, o| out.integer(o.count as i64));
}

/// A longitude and latitude argument pair, or Redis's error.
fn lon_lat<R: Reply>(out: &mut R, lon: &[u8], lat: &[u8]) -> Option<(f64, f64)> {
    let (Some(lon), Some(lat)) = (parse_float(lon), parse_float(lat)) else {
        out.error(b"ERR value is not a valid float");
        return None;
    };
    match geo::validate(lon, lat) {
        Ok(()) => Some((lon, lat)),
        Err(text) => {
            out.error(text.as_bytes());
            None
        }
    }
}

/// The score of `member` of the sorted set at `args[1]` (`None`: missing), or after replying
/// the store's error.
fn score_of<R: Reply>(ctx: &mut Ctx<'_, R>, key: usize, member: usize) -> Result<Option<f64>, ()> {
    let (key, member) = (ctx.args[key].clone(), ctx.args[member].clone());
    ctx.store
        .zscore(&key, &member)
        .map_err(|e| ctx.store_error(&e))
}

/// Replies WRONGTYPE (and returns false) when `args[1]` holds something other than a sorted
/// set (Redis checks the key even when no member is asked for).
fn zset_or_missing<R: Reply>(ctx: &mut Ctx<'_, R>) -> bool {
    match ctx.store.type_of(&ctx.args[1]) {
        Ok(None | Some(fc_shard::KeyType::ZSet)) => true,
        Ok(Some(_)) => {
            ctx.out
                .error(b"WRONGTYPE Operation against a key holding the wrong kind of value");
            false
        }
        Err(e) => {
            ctx.store_error(&e);
            false
        }
    }
}

/// The scores of the members from `args[2]` on (`None` each: missing), after checking the key
/// is a sorted set or missing; `None` after replying an error.
fn member_scores<R: Reply>(ctx: &mut Ctx<'_, R>) -> Option<Vec<Option<f64>>> {
    if !zset_or_missing(ctx) {
        return None;
    }
    (2..ctx.args.len())
        .map(|i| score_of(ctx, 1, i).ok())
        .collect()
}

/// `GEOPOS key [member ...]`: each member's position (the centre of its cell), or a null array.
pub(super) fn geopos<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(scores) = member_scores(ctx) else {
        return;
    };
    ctx.out.array_len(scores.len());
    for score in scores {
        match score {
            Some(score) => {
                let (lon, lat) = geo::decode(score);
                ctx.out.array_len(2);
                ctx.out.double_text(geo::format_coord(lon).as_bytes());
                ctx.out.double_text(geo::format_coord(lat).as_bytes());
            }
            None => ctx.out.null_array(),
        }
    }
}

/// `GEOHASH key [member ...]`: each member's 11-character geohash, or nil.
pub(super) fn geohash<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(scores) = member_scores(ctx) else {
        return;
    };
    ctx.out.array_len(scores.len());
    for score in scores {
        match score {
            Some(score) => ctx.out.bulk(&geo::geohash_string(score)),
            None => ctx.out.null(),
        }
    }
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`: the distance, or nil when a member is missing.
pub(super) fn geodist<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let unit = match ctx.args.len() {
        4 => Unit::M,
        5 => match Unit::parse(&ctx.args[4]) {
            Ok(unit) => unit,
            Err(text) => return ctx.out.error(text.as_bytes()),
        },
        _ => return ctx.syntax_error(),
    };
    let Ok(a) = score_of(ctx, 1, 2) else { return };
    let Ok(b) = score_of(ctx, 1, 3) else { return };
    let (Some(a), Some(b)) = (a, b) else {
        return ctx.out.null();
    };
    let ((lon1, lat1), (lon2, lat2)) = (geo::decode(a), geo::decode(b));
    let dist = geo::distance(lon1, lat1, lon2, lat2) / unit.to_meters();
    ctx.out.bulk(geo::format_dist(dist).as_bytes());
}

/// A radius and unit argument (`need numeric radius`, ...), Redis's `extractDistanceOrReply`.
fn radius<R: Reply>(out: &mut R, args: &[bytes::Bytes]) -> Option<Shape> {
    let Some(radius) = parse_float(&args[0]) else {
        out.error(b"ERR need numeric radius");
        return None;
    };
    if radius < 0.0 {
        out.error(b"ERR radius cannot be negative");
        return None;
    }
    match Unit::parse(&args[1]) {
        Ok(unit) => Some(Shape::Radius { radius, unit }),
        Err(text) => {
            out.error(text.as_bytes());
            None
        }
    }
}

/// A box's width, height and unit (`extractBoxOrReply`).
fn bybox<R: Reply>(out: &mut R, args: &[bytes::Bytes]) -> Option<Shape> {
    let Some(width) = parse_float(&args[0]) else {
        out.error(b"ERR need numeric width");
        return None;
    };
    let Some(height) = parse_float(&args[1]) else {
        out.error(b"ERR need numeric height");
        return None;
    };
    if width < 0.0 || height < 0.0 {
        out.error(b"ERR height or width cannot be negative");
        return None;
    }
    match Unit::parse(&args[2]) {
        Ok(unit) => Some(Shape::Box {
            width,
            height,
            unit,
        }),
        Err(text) => {
            out.error(text.as_bytes());
            None
        }
    }
}

/// A parsed search.
struct Query {
    center: (f64, f64),
    shape: Shape,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    /// `Some(true)`: DESC; `Some(false)`: ASC.
    sort: Option<bool>,
    any: bool,
    count: usize,
    /// The argument index of the destination (`STORE`/`STOREDIST`, `GEOSEARCHSTORE`'s).
    store: Option<usize>,
    store_dist: bool,
}

/// What a search found and how to answer it.
enum Parsed {
    /// Replied already (an error).
    Replied,
    /// The source is missing: an empty reply, or 0 with the destination deleted.
    NoSource {
        store: Option<usize>,
    },
    Run(Query),
}

/// Parses a search in Redis's order (the source's type checked first).
fn parse<R: Reply>(ctx: &mut Ctx<'_, R>, kind: GeoCommand) -> Parsed {
    let src = kind.source();
    let exists = match ctx.store.type_of(&ctx.args[src]) {
        Ok(None) => false,
        Ok(Some(fc_shard::KeyType::ZSet)) => true,
        Ok(Some(_)) => {
            ctx.out
                .error(b"WRONGTYPE Operation against a key holding the wrong kind of value");
            return Parsed::Replied;
        }
        Err(e) => {
            ctx.store_error(&e);
            return Parsed::Replied;
        }
    };
    let args = ctx.args;
    let mut center = None;
    let mut shape = None;
    let base = match kind {
        GeoCommand::Radius { .. } => {
            let Some(c) = lon_lat(ctx.out, &args[2], &args[3]) else {
                return Parsed::Replied;
            };
            center = Some(c);
            let Some(s) = radius(ctx.out, &args[4..6]) else {
                return Parsed::Replied;
            };
            shape = Some(s);
            6
        }
        GeoCommand::ByMember { .. } if !exists => 5,
        GeoCommand::ByMember { .. } => {
            let Ok(score) = score_of(ctx, src, 2) else {
                return Parsed::Replied;
            };
            let Some(score) = score else {
                ctx.out.error(b"ERR could not decode requested zset member");
                return Parsed::Replied;
            };
            center = Some(geo::decode(score));
            let Some(s) = radius(ctx.out, &args[3..5]) else {
                return Parsed::Replied;
            };
            shape = Some(s);
            5
        }
        GeoCommand::Search => 2,
        GeoCommand::SearchStore => 3,
    };
    let mut q = Query {
        center: (0.0, 0.0),
        shape: Shape::Radius {
            radius: 0.0,
            unit: Unit::M,
        },
        with_dist: false,
        with_hash: false,
        with_coord: false,
        sort: None,
        any: false,
        count: 0,
        store: (kind == GeoCommand::SearchStore).then_some(1),
        store_dist: false,
    };
    let (mut from_member, mut from_lonlat) = (false, false);
    let (mut by_radius, mut by_box) = (false, false);
    let search = kind.is_search();
    let may_store = matches!(
        kind,
        GeoCommand::Radius { ro: false } | GeoCommand::ByMember { ro: false }
    );
    let mut i = base;
    while i < args.len() {
        let left = args.len() - i - 1;
        let word = args[i].to_ascii_lowercase();
        match word.as_slice() {
            b"withdist" => q.with_dist = true,
            b"withhash" => q.with_hash = true,
            b"withcoord" => q.with_coord = true,
            b"any" => q.any = true,
            b"asc" => q.sort = Some(false),
            b"desc" => q.sort = Some(true),
            b"count" if left >= 1 => {
                let Some(n) = ctx.int(i + 1) else {
                    return Parsed::Replied;
                };
                if n <= 0 {
                    ctx.out.error(b"ERR COUNT must be > 0");
                    return Parsed::Replied;
                }
                q.count = usize::try_from(n).unwrap_or(usize::MAX);
                i += 1;
            }
            b"store" | b"storedist" if may_store && left >= 1 => {
                q.store = Some(i + 1);
                q.store_dist = word == b"storedist";
                i += 1;
            }
            b"storedist" if kind == GeoCommand::SearchStore => q.store_dist = true,
            b"frommember" if search && left >= 1 && !from_lonlat => {
                if exists {
                    let Ok(score) = score_of(ctx, src, i + 1) else {
                        return Parsed::Replied;
                    };
                    let Some(score) = score else {
                        ctx.out.error(b"ERR could not decode requested zset member");
                        return Parsed::Replied;
                    };
                    center = Some(geo::decode(score));
                }
                from_member = true;
                i += 1;
            }
            b"fromlonlat" if search && left >= 2 && !from_member => {
                let Some(c) = lon_lat(ctx.out, &args[i + 1], &args[i + 2]) else {
                    return Parsed::Replied;
                };
                center = Some(c);
                from_lonlat = true;
                i += 2;
            }
            b"byradius" if search && left >= 2 && !by_box => {
                let Some(s) = radius(ctx.out, &args[i + 1..i + 3]) else {
                    return Parsed::Replied;
                };
                shape = Some(s);
                by_radius = true;
                i += 2;
            }
            b"bybox" if search && left >= 3 && !by_radius => {
                let Some(s) = bybox(ctx.out, &args[i + 1..i + 4]) else {
                    return Parsed::Replied;
                };
                shape = Some(s);
                by_box = true;
                i += 3;
            }
            _ => {
                ctx.syntax_error();
                return Parsed::Replied;
            }
        }
        i += 1;
    }
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let what = if kind == GeoCommand::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        ctx.out.error(
            format!("ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
                .as_bytes(),
        );
        return Parsed::Replied;
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if search && !(from_member || from_lonlat) {
        ctx.out.error(
            format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")
                .as_bytes(),
        );
        return Parsed::Replied;
    }
    if search && !(by_radius || by_box) {
        ctx.out.error(
            format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}").as_bytes(),
        );
        return Parsed::Replied;
    }
    if q.any && q.count == 0 {
        ctx.out
            .error(b"ERR the ANY argument requires COUNT argument");
        return Parsed::Replied;
    }
    if !exists {
        return Parsed::NoSource { store: q.store };
    }
    if q.count != 0 && q.sort.is_none() && !q.any {
        q.sort = Some(false);
    }
    match (center, shape) {
        (Some(center), Some(shape)) => {
            q.center = center;
            q.shape = shape;
            Parsed::Run(q)
        }
        // Every path that reaches here set both.
        _ => {
            ctx.out.error(b"ERR syntax error");
            Parsed::Replied
        }
    }
}

/// One match: member, score, distance from the centre in meters.
struct Match {
    member: Vec<u8>,
    score: f64,
    dist: f64,
}

/// Collects the members of one score range that the shape admits.
struct Scan<'a> {
    q: &'a Query,
    found: &'a mut Vec<Match>,
    /// Stop once this many are found (`ANY`), 0 for all.
    limit: usize,
}

impl ScoredVisitor for Scan<'_> {
    fn len(&mut self, _n: usize) {}

    fn entry(&mut self, member: &[u8], score: f64) -> bool {
        let (lon, lat) = geo::decode(score);
        let (clon, clat) = self.q.center;
        if let Some(dist) = geo::within(&self.q.shape, clon, clat, lon, lat) {
            self.found.push(Match {
                member: member.to_vec(),
                score,
                dist,
            });
        }
        self.limit == 0 || self.found.len() < self.limit
    }
}

/// Runs a parsed search over the source: the matches in reply order, cut to COUNT.
fn run<R: Reply>(ctx: &mut Ctx<'_, R>, src: usize, q: &Query) -> Result<Vec<Match>, ()> {
    let (lon, lat) = q.center;
    let limit = if q.any { q.count } else { 0 };
    let mut found = Vec::new();
    for (min, max) in geo::search_ranges(lon, lat, &q.shape) {
        if limit != 0 && found.len() >= limit {
            break;
        }
        let range = ZRange::Score(
            ScoreBound::inclusive(min),
            ScoreBound {
                value: max,
                exclusive: true,
            },
        );
        let mut scan = Scan {
            q,
            found: &mut found,
            limit,
        };
        let key = ctx.args[src].clone();
        if let Err(e) = ctx.store.zrange_visit(&key, range, false, None, &mut scan) {
            ctx.store_error(&e);
            return Err(());
        }
    }
    let returned = if q.count == 0 {
        found.len()
    } else {
        q.count.min(found.len())
    };
    if let Some(descending) = q.sort {
        geo::sort_by_distance(&mut found, |m| m.dist, descending, returned);
    }
    found.truncate(returned);
    Ok(found)
}

/// The score a stored match gets: its geohash, or (`STOREDIST`) its distance in the unit.
fn stored_score(q: &Query, m: &Match) -> f64 {
    if q.store_dist {
        m.dist / q.shape.unit().to_meters()
    } else {
        m.score
    }
}

/// Replies the matches (member, or [member, dist?, hash?, [lon, lat]?]).
fn reply_matches<R: Reply>(out: &mut R, q: &Query, found: &[Match]) {
    let options = usize::from(q.with_dist) + usize::from(q.with_hash) + usize::from(q.with_coord);
    out.array_len(found.len());
    for m in found {
        if options > 0 {
            out.array_len(options + 1);
        }
        out.bulk(&m.member);
        if q.with_dist {
            out.bulk(geo::format_dist(m.dist / q.shape.unit().to_meters()).as_bytes());
        }
        if q.with_hash {
            out.integer(m.score as i64);
        }
        if q.with_coord {
            let (lon, lat) = geo::decode(m.score);
            out.array_len(2);
            out.double_text(geo::format_coord(lon).as_bytes());
            out.double_text(geo::format_coord(lat).as_bytes());
        }
    }
}

/// Replaces the sorted set at `args[dest]` with `entries` (deleted when empty); replies the
/// count.
fn store_at<R: Reply>(ctx: &mut Ctx<'_, R>, dest: usize, entries: &[(f64, Vec<u8>)]) {
    let dest = ctx.args[dest].clone();
    if let Err(e) = ctx.store.try_delete(&dest) {
        return ctx.store_error(&e);
    }
    if !entries.is_empty() {
        let pairs: Vec<(f64, &[u8])> = entries.iter().map(|(s, m)| (*s, &m[..])).collect();
        if let Err(e) = ctx.store.zadd(&dest, &pairs, ZAddOptions::default()) {
            return ctx.store_error(&e);
        }
    }
    ctx.out.integer(entries.len() as i64);
}

/// A search command with every key on this shard (its handler).
fn search<R: Reply>(ctx: &mut Ctx<'_, R>, kind: GeoCommand) {
    match parse(ctx, kind) {
        Parsed::Replied => {}
        Parsed::NoSource { store: None } => ctx.out.array_len(0),
        Parsed::NoSource { store: Some(dest) } => store_at(ctx, dest, &[]),
        Parsed::Run(q) => {
            let Ok(found) = run(ctx, kind.source(), &q) else {
                return;
            };
            match q.store {
                None => reply_matches(ctx.out, &q, &found),
                Some(dest) => {
                    let entries: Vec<(f64, Vec<u8>)> = found
                        .into_iter()
                        .map(|m| (stored_score(&q, &m), m.member))
                        .collect();
                    store_at(ctx, dest, &entries);
                }
            }
        }
    }
}

/// `[_, src, command, args...]` (the command's own arguments, its name first): the search of a
/// storing command whose destination is on another shard, run on the source's owner. Replies
/// an error, or `[dest-index, score, member, score, member, ...]`; `crate::multi` stores them.
pub(crate) fn export<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(kind) = GeoCommand::of(&ctx.args[2]) else {
        return ctx.syntax_error();
    };
    let inner = ctx.args[2..].to_vec();
    let mut sub = Ctx {
        store: &mut *ctx.store,
        args: &inner,
        route: None,
        out: &mut *ctx.out,
    };
    let (dest, entries) = match parse(&mut sub, kind) {
        Parsed::Replied => return,
        Parsed::NoSource { store } => (store, Vec::new()),
        Parsed::Run(q) => {
            let Ok(found) = run(&mut sub, kind.source(), &q) else {
                return;
            };
            let entries: Vec<(f64, Vec<u8>)> = found
                .into_iter()
                .map(|m| (stored_score(&q, &m), m.member))
                .collect();
            (q.store, entries)
        }
    };
    let Some(dest) = dest else {
        // Not a storing search: no destination to send it to.
        return ctx.syntax_error();
    };
    ctx.out.array_len(1 + 2 * entries.len());
    ctx.out.integer(dest as i64);
    for (score, member) in entries {
        ctx.out.double(score);
        ctx.out.bulk(&member);
    }
}

pub(super) fn georadius<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::Radius { ro: false });
}

pub(super) fn georadius_ro<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::Radius { ro: true });
}

pub(super) fn georadiusbymember<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::ByMember { ro: false });
}

pub(super) fn georadiusbymember_ro<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::ByMember { ro: true });
}

pub(super) fn geosearch<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::Search);
}

pub(super) fn geosearchstore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    search(ctx, GeoCommand::SearchStore);
}
