//! The pure math of Redis's GEO commands (`GEOADD`, `GEOPOS`, `GEOHASH`, `GEODIST`,
//! `GEOSEARCH`, `GEOSEARCHSTORE`, `GEORADIUS*`), reproducing redis-server 7.0.15 bit for bit
//! (checked against its replies, `tests/geo.rs`).
//!
//! # Encoding
//!
//! A GEO key is an ordinary sorted set. A member's score is a 52-bit *interleaved geohash* of its
//! position, stored as an `f64` (52 bits fit the mantissa, so the score is an exact integer,
//! `WITHHASH` replies it as one):
//!
//! * the longitude range `[-180, 180]` and the latitude range `[-85.05112878, 85.05112878]` (the
//!   Web-Mercator limits, not ±90) are each cut into `2^26` equal cells (*step* 26); a coordinate
//!   becomes the 26-bit index `trunc((x - min) / (max - min) * 2^26)` of its cell;
//! * the two indexes are interleaved, latitude bits in the even positions (bit 0, 2, ...) and
//!   longitude bits in the odd ones, giving `[lon25 lat25 lon24 lat24 ... lon0 lat0]`.
//!
//! A prefix of `2 * s` bits is the geohash of the same point at step `s`: a cell of the `2^s` by
//! `2^s` grid. All points inside that cell have scores in one contiguous range,
//! `[prefix << (52 - 2s), (prefix + 1) << (52 - 2s))`, which is what makes area searches a few
//! sorted-set range scans.
//!
//! Decoding ([`decode`], what `GEOPOS` and `WITHCOORD` print) returns the centre of the step-26
//! cell, clamped to the valid ranges: not the coordinates that were added. The two coordinate
//! maxima are themselves valid input; `lon = 180` or `lat = 85.05112878` gives an index of
//! exactly `2^26`, which spills into bit 53 or 52 of the score, as it does in Redis.
//!
//! # Searching
//!
//! [`search_ranges`] gives the score ranges Redis scans for a shape (`BYRADIUS` / `BYBOX`, or the
//! `GEORADIUS*` radius) around a centre; [`within`] filters each candidate. The server runs:
//!
//! ```text
//! matches = []
//! for (min, max) in search_ranges(lon, lat, &shape):          // Redis's box order
//!     if ANY and matches.len() >= count: stop
//!     for (score, member) in zset with min <= score < max:    // ascending (score, member)
//!         (plon, plat) = decode(score)
//!         if let Some(dist_m) = within(&shape, lon, lat, plon, plat): matches.push(...)
//!         if ANY and matches.len() >= count: stop
//! ```
//!
//! then orders the matches:
//!
//! * no `ASC`/`DESC` (and no `COUNT`, or `COUNT ... ANY`): scan order, as above: the boxes in
//!   the order [`search_ranges`] returns them (centre, N, S, E, W, NE, NW, SE, SW, minus pruned
//!   and repeated boxes), members of one box in sorted-set order (score, then member bytes);
//! * `COUNT n` without `ANY` and without `ASC`/`DESC` implies `ASC`;
//! * `ASC` / `DESC`: [`sort_by_distance`] (a stable sort of the scan order by distance when
//!   every match is replied; Redis's partial quicksort, which arranges equal distances its own
//!   way, when `COUNT` cuts the list);
//! * the first `count` (all without `COUNT`) are replied; `WITHDIST` prints
//!   [`format_dist`]`(dist_m / unit.to_meters())`, `WITHHASH` the score as an integer,
//!   `WITHCOORD` [`format_coord`] of the decoded longitude and latitude; `STOREDIST` stores
//!   `dist_m / unit.to_meters()` as the score.
//!
//! # Fidelity
//!
//! Every float operation follows the order of the C code so that the results are the same
//! doubles; `sin`, `cos` and `asin` are the platform libm's, as for `redis-server` (on the glibc
//! it uses, the results are the same bits). The reference is the redis-server 7.0.15 installed
//! here (Debian build), whose geo code already has what upstream shipped with 7.2: the
//! equal-longitude shortcut in [`distance`], the latitude-arc test first in `BYBOX`, and
//! `fixedpoint_d2string` for distances ([`format_dist`]); its partial quicksort is the older
//! one without the insertion-sort switch. Each of these differences is pinned by a reply in
//! `tests/fixtures/geo/redis7.txt`.

use std::f64::consts::PI;

/// Smallest valid longitude.
pub const LONG_MIN: f64 = -180.0;
/// Largest valid longitude.
pub const LONG_MAX: f64 = 180.0;
/// Smallest valid latitude (the Web-Mercator limit).
pub const LAT_MIN: f64 = -85.051_128_78;
/// Largest valid latitude (the Web-Mercator limit).
pub const LAT_MAX: f64 = 85.051_128_78;
/// Earth's quadratic mean radius for WGS-84, in meters, as Redis uses it for distances.
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// The precision of stored scores: 26 bits per coordinate, 52 in all.
pub const STEP_MAX: u8 = 26;
/// The error (without the leading `-`) for a unit other than m, km, ft or mi.
pub const UNIT_ERROR: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";

/// Half the Earth's circumference in Web-Mercator meters: the step estimation's ceiling.
const MERCATOR_MAX: f64 = 20_037_726.37;
/// Degrees to radians (`M_PI / 180.0`).
const D_R: f64 = PI / 180.0;

fn deg_rad(angle: f64) -> f64 {
    angle * D_R
}

fn rad_deg(angle: f64) -> f64 {
    angle / D_R
}

/// Checks a (longitude, latitude) pair as `GEOADD` and `FROMLONLAT` do.
///
/// # Errors
///
/// Redis's error text (without the leading `-`), the numbers printed with C's `%f`:
/// `ERR invalid longitude,latitude pair 12.000000,100.000000` (infinities print `inf`). A NaN is
/// rejected too (`nan`); Redis's number parser refuses NaN before this check is reached, so the
/// caller should parse numbers as Redis does first.
pub fn validate(lon: f64, lat: f64) -> Result<(), String> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(format!(
            "ERR invalid longitude,latitude pair {},{}",
            format_c_f6(lon),
            format_c_f6(lat)
        ));
    }
    Ok(())
}

/// C's `%f` (6 decimals) of a double, as glibc prints it (`inf`, `-inf`, `nan`, `-nan`).
fn format_c_f6(x: f64) -> String {
    format_fixed(x, 6)
}

/// C's `%.<decimals>f` of a double as glibc prints it: exact decimal expansion rounded half to
/// even (Rust's `{:.N}` does the same), and glibc's spellings of the non-finite values.
fn format_fixed(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    format!("{x:.decimals$}")
}

/// A geohash at some precision: `2 * step` bits (Redis's `GeoHashBits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bits {
    bits: u64,
    step: u8,
}

impl Bits {
    /// Redis's `GZERO`, the marker of a pruned neighbour.
    const ZERO: Self = Self { bits: 0, step: 0 };

    /// Redis's `HASHISZERO`.
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The 52-bit-aligned score of the cell's first point (`geohashAlign52Bits`).
    fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }

    /// The score range `[min, max)` holding every point of this cell (`scoresOfGeoHashBox`).
    fn score_range(self) -> (u64, u64) {
        let next = Self {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

/// A coordinate range (Redis's `GeoHashRange`).
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The bounds of a geohash cell (Redis's `GeoHashArea`).
#[derive(Debug, Clone, Copy)]
struct Area {
    lon: Range,
    lat: Range,
}

/// Spreads the 32 bits of `lat` to the even positions and those of `lon` to the odd ones.
fn interleave(lat: u32, lon: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = u64::from(lat);
    let mut y = u64::from(lon);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave`]: `(lat, lon)`, the even and the odd bits.
fn deinterleave(bits: u64) -> (u32, u32) {
    const B: [u64; 6] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
        0x0000_0000_FFFF_FFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = bits;
    let mut y = bits >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    // Both halves are masked to 32 bits by the last round.
    (
        u32::try_from(x).unwrap_or(u32::MAX),
        u32::try_from(y).unwrap_or(u32::MAX),
    )
}

/// Redis's `geohashEncode` for a point already known to be valid.
fn encode_in(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Bits {
    let scale = (1_u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    // C converts the doubles to `uint32_t` by truncation; the offsets are within [0, 2^26].
    Bits {
        bits: interleave(lat_offset as u32, lon_offset as u32),
        step,
    }
}

/// Redis's `geohashDecode`: the bounds of the cell.
fn decode_area(hash: Bits) -> Area {
    let (ilat, ilon) = deinterleave(hash.bits);
    let cells = (1_u64 << hash.step) as f64;
    let lat_scale = LAT_RANGE.max - LAT_RANGE.min;
    let lon_scale = LONG_RANGE.max - LONG_RANGE.min;
    Area {
        lat: Range {
            min: LAT_RANGE.min + (f64::from(ilat) / cells) * lat_scale,
            max: LAT_RANGE.min + (f64::from(ilat.wrapping_add(1)) / cells) * lat_scale,
        },
        lon: Range {
            min: LONG_RANGE.min + (f64::from(ilon) / cells) * lon_scale,
            max: LONG_RANGE.min + (f64::from(ilon.wrapping_add(1)) / cells) * lon_scale,
        },
    }
}

/// The 52-bit geohash of a point (the sorted-set score as an integer), as `GEOADD` computes it.
///
/// The point must have passed [`validate`]. The result is below `2^52`, except at the maxima
/// (`lon == 180` sets bit 53, `lat == 85.05112878` bit 52), as in Redis.
#[must_use]
pub fn hash(lon: f64, lat: f64) -> u64 {
    encode_in(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX).align52()
}

/// The sorted-set score `GEOADD` stores for a point: [`hash`] as a double (rounded to nearest
/// when above `2^53`, as Redis's integer-to-string-to-double round trip does).
///
/// The point must have passed [`validate`].
#[must_use]
pub fn encode(lon: f64, lat: f64) -> f64 {
    hash(lon, lat) as f64
}

/// The position a score denotes (`GEOPOS`, `WITHCOORD`, `FROMMEMBER`): `(lon, lat)`, the centre of
/// its step-26 cell, clamped to the valid ranges.
///
/// The score goes through C's `(uint64_t)` cast; Rust's saturating cast agrees for every score a
/// GEO command writes (negative or NaN scores, undefined in C, give 0 here).
#[must_use]
pub fn decode(score: f64) -> (f64, f64) {
    let area = decode_area(Bits {
        bits: score as u64,
        step: STEP_MAX,
    });
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The `GEOHASH` string of a score: the decoded position re-encoded at step 26 over the standard
/// ranges (latitude ±90), as 11 base-32 characters; the 11th stands for bits Redis does not have
/// and is always `'0'`.
#[must_use]
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode(score);
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode_in(LONG_RANGE, standard_lat, lon, lat, STEP_MAX).bits;
    let mut out = [b'0'; 11];
    for (i, slot) in out.iter_mut().take(10).enumerate() {
        let shift = 52 - (i + 1) * 5;
        // Masked to 5 bits, so the index is in range.
        *slot = ALPHABET[((bits >> shift) & 0x1f) as usize];
    }
    out
}

/// The north-south distance in meters between two latitudes (`geohashGetLatDistance`).
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The great-circle (haversine) distance in meters between two points, as redis-server 7.0.15
/// computes it (`geohashGetDistance`, for `GEODIST`, `WITHDIST` and the radius test): when the
/// longitudes are equal (the half-difference's sine is 0) it is the plain latitude arc, which can
/// differ from the haversine in the last bits.
#[must_use]
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// A distance unit of the GEO commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Meters (`m`).
    M,
    /// Kilometers (`km`).
    Km,
    /// Feet (`ft`).
    Ft,
    /// Miles (`mi`).
    Mi,
}

impl Unit {
    /// Parses a unit argument, ASCII case-insensitively as Redis does.
    ///
    /// # Errors
    ///
    /// [`UNIT_ERROR`] for anything but m, km, ft and mi.
    pub fn parse(arg: &[u8]) -> Result<Self, &'static str> {
        if arg.eq_ignore_ascii_case(b"m") {
            Ok(Self::M)
        } else if arg.eq_ignore_ascii_case(b"km") {
            Ok(Self::Km)
        } else if arg.eq_ignore_ascii_case(b"ft") {
            Ok(Self::Ft)
        } else if arg.eq_ignore_ascii_case(b"mi") {
            Ok(Self::Mi)
        } else {
            Err(UNIT_ERROR)
        }
    }

    /// Meters per unit (Redis's factors: 1, 1000, 0.3048, 1609.34). A distance in meters is
    /// divided by this to be replied in the unit.
    #[must_use]
    pub fn to_meters(self) -> f64 {
        match self {
            Self::M => 1.0,
            Self::Km => 1000.0,
            Self::Ft => 0.3048,
            Self::Mi => 1609.34,
        }
    }
}

/// A search area around a centre, in the units the client gave (Redis keeps the raw numbers and
/// the factor apart and multiplies late; the order matters for the last bit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// `BYRADIUS radius unit` (and the `GEORADIUS*` commands): points within `radius`.
    Radius {
        /// The radius, in `unit`; not negative.
        radius: f64,
        /// The unit of `radius` and of replied distances.
        unit: Unit,
    },
    /// `BYBOX width height unit`: an axis-aligned box centred on the centre.
    Box {
        /// East-west extent, in `unit`; not negative.
        width: f64,
        /// North-south extent, in `unit`; not negative.
        height: f64,
        /// The unit of the sides and of replied distances.
        unit: Unit,
    },
}

impl Shape {
    /// The unit the shape was given in (replied distances are in it).
    #[must_use]
    pub fn unit(&self) -> Unit {
        match *self {
            Self::Radius { unit, .. } | Self::Box { unit, .. } => unit,
        }
    }

    /// Redis's `geohashBoundingBox`: `(min_lon, min_lat, max_lon, max_lat)`.
    fn bounding_box(&self, lon: f64, lat: f64) -> (f64, f64, f64, f64) {
        let conversion = self.unit().to_meters();
        let (half_height, half_width) = match *self {
            Self::Radius { radius, .. } => (conversion * radius, conversion * radius),
            Self::Box { width, height, .. } => {
                (conversion * (height / 2.0), conversion * (width / 2.0))
            }
        };
        let lat_delta = rad_deg(half_height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(half_width / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
        let lon_delta_bottom =
            rad_deg(half_width / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
        let lon_delta = if lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        (
            lon - lon_delta,
            lat - lat_delta,
            lon + lon_delta,
            lat + lat_delta,
        )
    }

    /// The radius the step estimation uses: the radius, or the box's half diagonal; in meters.
    fn radius_meters(&self) -> f64 {
        let raw = match *self {
            Self::Radius { radius, .. } => radius,
            Self::Box { width, height, .. } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        raw * self.unit().to_meters()
    }
}

/// Redis's `geohashEstimateStepsByRadius`: the step whose cells (with their neighbours) should
/// cover a search of this radius at this latitude.
fn estimate_steps(radius_m: f64, lat: f64) -> u8 {
    if radius_m == 0.0 {
        return STEP_MAX;
    }
    let mut range = radius_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    // Framed to 1..=26, so it fits.
    u8::try_from(step.clamp(1, i32::from(STEP_MAX))).unwrap_or(STEP_MAX)
}

/// Moves a cell one column east (`+1`) or west (`-1`), wrapping (`geohash_move_x`).
fn move_x(hash: &mut Bits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555_u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaa_u64 >> shift;
    hash.bits = x | y;
}

/// Moves a cell one row north (`+1`) or south (`-1`), wrapping (`geohash_move_y`).
fn move_y(hash: &mut Bits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaa_u64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555_u64 >> shift;
    hash.bits = x | y;
}

fn moved(hash: Bits, dx: i8, dy: i8) -> Bits {
    let mut out = hash;
    move_x(&mut out, dx);
    move_y(&mut out, dy);
    out
}

/// A cell and its eight neighbours (`GeoHashNeighbors`).
struct Neighbors {
    north: Bits,
    south: Bits,
    east: Bits,
    west: Bits,
    north_east: Bits,
    north_west: Bits,
    south_east: Bits,
    south_west: Bits,
}

impl Neighbors {
    fn of(hash: Bits) -> Self {
        Self {
            east: moved(hash, 1, 0),
            west: moved(hash, -1, 0),
            south: moved(hash, 0, -1),
            north: moved(hash, 0, 1),
            north_west: moved(hash, -1, 1),
            north_east: moved(hash, 1, 1),
            south_east: moved(hash, 1, -1),
            south_west: moved(hash, -1, -1),
        }
    }
}

/// The sorted-set score ranges `[min, max)` that Redis scans for a search of `shape` around
/// `(lon, lat)`, in Redis's scan order (`geohashCalculateAreasByShapeWGS84` then
/// `membersOfAllNeighbors`).
///
/// The centre's cell at the estimated step (one coarser if a neighbour does not reach the
/// bounding box), then its north, south, east, west, north-east, north-west, south-east and
/// south-west neighbours; neighbours on a side the bounding box does not reach are dropped (from
/// step 2), and so is a box equal to the last one scanned, except that the centre itself is
/// never compared (Redis's `last_processed` quirk; at step 1, where the grid is 2 by 2, this
/// leaves the centre and its 3 distinct neighbours). Scanning the ranges exactly as returned
/// reproduces Redis, repeats included; in 400 000 random probes (the coordinate limits among
/// them) the ranges were always pairwise disjoint, so a member is never found twice.
///
/// The centre must have passed [`validate`] (or be a [`decode`]d member); `shape`'s sizes must
/// not be negative.
#[must_use]
pub fn search_ranges(lon: f64, lat: f64, shape: &Shape) -> Vec<(f64, f64)> {
    let (min_lon, min_lat, max_lon, max_lat) = shape.bounding_box(lon, lat);
    let mut steps = estimate_steps(shape.radius_meters(), lat);

    let mut hash = encode_in(LONG_RANGE, LAT_RANGE, lon, lat, steps);
    let mut neighbors = Neighbors::of(hash);
    let mut area = decode_area(hash);

    let north = decode_area(neighbors.north);
    let south = decode_area(neighbors.south);
    let east = decode_area(neighbors.east);
    let west = decode_area(neighbors.west);
    let decrease_step = north.lat.max < max_lat
        || south.lat.min > min_lat
        || east.lon.max < max_lon
        || west.lon.min > min_lon;
    if steps > 1 && decrease_step {
        steps -= 1;
        hash = encode_in(LONG_RANGE, LAT_RANGE, lon, lat, steps);
        neighbors = Neighbors::of(hash);
        area = decode_area(hash);
    }

    if steps >= 2 {
        if area.lat.min < min_lat {
            neighbors.south = Bits::ZERO;
            neighbors.south_west = Bits::ZERO;
            neighbors.south_east = Bits::ZERO;
        }
        if area.lat.max > max_lat {
            neighbors.north = Bits::ZERO;
            neighbors.north_east = Bits::ZERO;
            neighbors.north_west = Bits::ZERO;
        }
        if area.lon.min < min_lon {
            neighbors.west = Bits::ZERO;
            neighbors.south_west = Bits::ZERO;
            neighbors.north_west = Bits::ZERO;
        }
        if area.lon.max > max_lon {
            neighbors.east = Bits::ZERO;
            neighbors.south_east = Bits::ZERO;
            neighbors.north_east = Bits::ZERO;
        }
    }

    let boxes = [
        hash,
        neighbors.north,
        neighbors.south,
        neighbors.east,
        neighbors.west,
        neighbors.north_east,
        neighbors.north_west,
        neighbors.south_east,
        neighbors.south_west,
    ];
    let mut ranges = Vec::with_capacity(boxes.len());
    let mut last_processed = 0_usize;
    for (i, cell) in boxes.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if last_processed != 0 && *cell == boxes[last_processed] {
            continue;
        }
        let (min, max) = cell.score_range();
        ranges.push((min as f64, max as f64));
        last_processed = i;
    }
    ranges
}

/// Whether a point (as [`decode`]d from its score) matches `shape` around the centre, and if so
/// its distance from the centre in meters ([`distance`]; Redis's `geoWithinShape`).
///
/// A radius matches when the distance is at most the radius; a box when the north-south distance
/// (the latitude arc) is at most half the height and the east-west distance (measured along the
/// point's latitude) at most half the width (`geohashGetDistanceIfInRectangle`).
#[must_use]
pub fn within(
    shape: &Shape,
    center_lon: f64,
    center_lat: f64,
    point_lon: f64,
    point_lat: f64,
) -> Option<f64> {
    let conversion = shape.unit().to_meters();
    match *shape {
        Shape::Radius { radius, .. } => {
            let dist = distance(center_lon, center_lat, point_lon, point_lat);
            if dist > radius * conversion {
                return None;
            }
            Some(dist)
        }
        Shape::Box { width, height, .. } => {
            let width_m = width * conversion;
            let height_m = height * conversion;
            if lat_distance(point_lat, center_lat) > height_m / 2.0 {
                return None;
            }
            if distance(point_lon, point_lat, center_lon, point_lat) > width_m / 2.0 {
                return None;
            }
            Some(distance(center_lon, center_lat, point_lon, point_lat))
        }
    }
}

/// Redis's distance comparator (`sort_gp_asc`, or its negation `sort_gp_desc`): `1`, `0` or
/// `-1`; a NaN compares as "less" both ways, as in C.
fn compare_dist(a: f64, b: f64, descending: bool) -> i32 {
    let asc = if a > b {
        1
    } else if a == b {
        0
    } else {
        -1
    };
    if descending { -asc } else { asc }
}

/// Orders search matches as `ASC` / `DESC` (or the `ASC` implied by `COUNT`) do in Redis 7.0 on
/// glibc, ties included; `dist` gives a match's distance in meters.
///
/// `count` is how many matches will be replied (`COUNT`, or all of them). When it covers every
/// match, Redis's `qsort` is glibc's stable merge sort, reproduced here, so equal distances keep
/// scan order in both directions. When it is smaller, Redis uses its partial quicksort
/// (`pqsort`, from NetBSD), also reproduced here step for step: the first `count` positions are
/// the nearest (farthest) matches in order, ties arranged exactly as Redis arranges them, and the
/// rest are unspecified. Reply `matches[..count]`.
pub fn sort_by_distance<T>(
    matches: &mut [T],
    dist: impl Fn(&T) -> f64,
    descending: bool,
    count: usize,
) {
    let n = matches.len();
    if n < 2 || count == 0 {
        return;
    }
    let cmp = |a: &T, b: &T| compare_dist(dist(a), dist(b), descending);
    if count >= n {
        let mut order: Vec<usize> = (0..n).collect();
        let mut tmp = Vec::with_capacity(n);
        merge_sort(&mut order, &mut tmp, &|i, j| cmp(&matches[i], &matches[j]));
        apply_permutation(matches, &mut order);
    } else {
        partial_quicksort(matches, 0, n, 0, count - 1, &cmp);
    }
}

/// glibc's `msort_with_tmp` on indexes: top-down, left half first, ties taken from the left.
fn merge_sort(items: &mut [usize], tmp: &mut Vec<usize>, cmp: &impl Fn(usize, usize) -> i32) {
    let n = items.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    merge_sort(&mut items[..n1], tmp, cmp);
    merge_sort(&mut items[n1..], tmp, cmp);
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(items[i], items[j]) <= 0 {
            tmp.push(items[i]);
            i += 1;
        } else {
            tmp.push(items[j]);
            j += 1;
        }
    }
    tmp.extend_from_slice(&items[i..n1]);
    items[..tmp.len()].copy_from_slice(tmp);
}

/// Rearranges `items` so that position `i` holds what was at `order[i]`.
fn apply_permutation<T>(items: &mut [T], order: &mut [usize]) {
    for start in 0..items.len() {
        if order[start] == start {
            continue;
        }
        let mut j = start;
        loop {
            let k = order[j];
            order[j] = j;
            if k == start {
                break;
            }
            items.swap(j, k);
            j = k;
        }
    }
}

/// Insertion sort of `items[a..a + n]`, as `pqsort` does for short runs.
fn insertion_sort<T>(items: &mut [T], a: usize, n: usize, cmp: &impl Fn(&T, &T) -> i32) {
    for m in a + 1..a + n {
        let mut l = m;
        while l > a && cmp(&items[l - 1], &items[l]) > 0 {
            items.swap(l, l - 1);
            l -= 1;
        }
    }
}

fn med3<T>(items: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> i32) -> usize {
    let (x, y, z) = (&items[a], &items[b], &items[c]);
    if cmp(x, y) < 0 {
        if cmp(y, z) < 0 {
            b
        } else if cmp(x, z) < 0 {
            c
        } else {
            a
        }
    } else if cmp(y, z) > 0 {
        b
    } else if cmp(x, z) < 0 {
        a
    } else {
        c
    }
}

/// Swaps `items[a..a + n]` with `items[b..b + n]` pairwise, in order (`vecswap`).
fn vecswap<T>(items: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        items.swap(a + i, b + i);
    }
}

/// Redis 7.0's `_pqsort` on `items[a..a + n]`: the NetBSD (Bentley-McIlroy) quicksort that
/// skips the partitions lying wholly outside the element range `lrange..=rrange`. (Later Redis
/// versions added a switch to insertion sort after a partition without swaps, which arranges
/// ties differently; 7.0 has none.)
fn partial_quicksort<T>(
    items: &mut [T],
    mut a: usize,
    mut n: usize,
    lrange: usize,
    rrange: usize,
    cmp: &impl Fn(&T, &T) -> i32,
) {
    let overlaps = |start: usize, len: usize| rrange >= start && lrange < start + len;
    loop {
        if n < 7 {
            insertion_sort(items, a, n, cmp);
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(items, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(items, pm - d, pm, pm + d, cmp);
                pn = med3(items, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(items, pl, pm, pn, cmp);
        }
        items.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&items[pb], &items[a]);
                if c > 0 {
                    break;
                }
                if c == 0 {
                    items.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&items[pc], &items[a]);
                if c < 0 {
                    break;
                }
                if c == 0 {
                    items.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            items.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(items, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(items, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && overlaps(a, r) {
            partial_quicksort(items, a, r, lrange, rrange, cmp);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if overlaps(a, n) {
                continue;
            }
        }
        return;
    }
}

/// A coordinate as `GEOPOS` and `WITHCOORD` reply it (Redis's `addReplyHumanLongDouble`):
/// `%.17Lf` of the value, trailing zeros and then a trailing dot removed, `-0` written `0`.
#[must_use]
pub fn format_coord(x: f64) -> String {
    if !x.is_finite() {
        // ld2string's spellings; decoded coordinates are always finite.
        return if x.is_nan() {
            "nan"
        } else if x < 0.0 {
            "-inf"
        } else {
            "inf"
        }
        .to_owned();
    }
    // A double widened to long double is exact, so %.17Lf is %.17f of the double.
    let mut s = format!("{x:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".to_owned();
    }
    s
}

/// A distance as `GEODIST` and `WITHDIST` reply it (Redis's `fixedpoint_d2string` with 4
/// decimals), already divided by the unit's [`Unit::to_meters`].
///
/// That is not C's `%.4f`: the value is multiplied by 10000 in floating point and rounded half to
/// even to an integer (`llrint`), so a distance within an ulp of a tie can print one digit
/// differently from an exact decimal rounding. Zero prints `0.0000`; a NaN or an out-of-range
/// product becomes `i64::MIN` as on x86-64 (`-922337203685477.5808`).
#[must_use]
pub fn format_dist(x: f64) -> String {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x == 0.0 {
        return "0.0000".to_owned();
    }
    let scaled = x * 10_000.0;
    let fixed = if scaled.is_nan() || !(-TWO_63..TWO_63).contains(&scaled) {
        i64::MIN
    } else {
        // In range and integral after rounding, so the cast is exact.
        scaled.round_ties_even() as i64
    };
    let magnitude = fixed.unsigned_abs();
    let sign = if fixed < 0 { "-" } else { "" };
    format!("{sign}{}.{:04}", magnitude / 10_000, magnitude % 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for &(lat, lon) in &[
            (0_u32, 0_u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(lat, lon)), (lat, lon));
        }
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
    }

    #[test]
    fn steps_follow_the_radius() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1.0, 0.0), 24);
        assert_eq!(estimate_steps(1.0, 70.0), 23);
        assert_eq!(estimate_steps(1.0, -85.0), 22);
        assert_eq!(estimate_steps(1e9, 0.0), 1);
    }

    #[test]
    fn formats_like_c() {
        assert_eq!(format_coord(0.0), "0");
        assert_eq!(format_coord(-0.0), "0");
        assert_eq!(format_coord(180.0), "180");
        assert_eq!(format_coord(0.5), "0.5");
        assert_eq!(format_dist(0.0), "0.0000");
        assert_eq!(format_dist(-0.0), "0.0000");
        assert_eq!(format_dist(0.00005), "0.0000");
        assert_eq!(format_dist(0.00015), "0.0001");
        assert_eq!(format_dist(12.3456), "12.3456");
        assert_eq!(format_dist(166_274.151_8), "166274.1518");
        assert_eq!(format_dist(-1.5), "-1.5000");
        assert_eq!(format_dist(f64::NAN), "-922337203685477.5808");
        assert_eq!(format_dist(f64::INFINITY), "-922337203685477.5808");
        assert_eq!(format_c_f6(f64::NAN), "nan");
        assert_eq!(format_c_f6(12.0), "12.000000");
        assert_eq!(format_fixed(0.125, 2), "0.12");
        assert_eq!(format_fixed(0.375, 2), "0.38");
    }
}
