//! HyperLogLog against Redis: replays `fixtures/hll/script.txt`, recorded from redis-server
//! 7.0.15 by `fixtures/hll/gen.py`, through `fc_shard::hll` over a plain map of strings and
//! asserts every reply and every stored value (`GET`) is Redis's, byte for byte. Then proptests:
//! counts within the error bound, idempotent adds, merge/union agreement, and arbitrary bytes
//! behind a valid header never panic.

use std::collections::HashMap;

use fc_shard::hll::{self, HllError};
use proptest::prelude::*;

const SCRIPT: &str = include_str!("fixtures/hll/script.txt");

/// 64-bit FNV-1a, the digest `gen.py` records long bulk replies by.
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("fixture hex"))
        .collect()
}

/// The arguments one script token stands for (see `gen.py`).
fn expand(token: &str) -> Vec<Vec<u8>> {
    if let Some(h) = token.strip_prefix("x:") {
        return vec![unhex(h)];
    }
    if let Some(rest) = token.strip_prefix("@rep:") {
        let parts: Vec<&str> = rest.split(':').collect();
        let mut bytes = unhex(parts[0]);
        let rep = unhex(parts[1]);
        for _ in 0..parts[2].parse::<usize>().expect("fixture count") {
            bytes.extend_from_slice(&rep);
        }
        return vec![bytes];
    }
    if let Some(rest) = token.strip_prefix("@seq:") {
        let parts: Vec<&str> = rest.split(':').collect();
        let (start, end): (usize, usize) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
        return (start..end)
            .map(|i| format!("{}{i}", parts[0]).into_bytes())
            .collect();
    }
    vec![token.as_bytes().to_vec()]
}

/// A keyspace of strings running the commands of the script the way a server would with
/// `fc_shard::hll`.
struct Server {
    keys: HashMap<Vec<u8>, Vec<u8>>,
    sparse_max_bytes: usize,
}

fn error_reply(e: HllError) -> String {
    format!("-{e}")
}

impl Server {
    fn run(&mut self, args: &[Vec<u8>], expected: &str) -> String {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        match name.as_str() {
            "PFADD" => {
                let elements: Vec<&[u8]> = args[2..].iter().map(Vec::as_slice).collect();
                let created = !self.keys.contains_key(&args[1]);
                let value = self
                    .keys
                    .entry(args[1].clone())
                    .or_insert_with(hll::new_sparse);
                match hll::add(value, &elements, self.sparse_max_bytes) {
                    Ok(changed) => format!(":{}", u8::from(changed || created)),
                    Err(e) => error_reply(e),
                }
            }
            "PFCOUNT" if args.len() == 2 => match self.keys.get_mut(&args[1]) {
                None => ":0".to_owned(),
                Some(value) => match hll::count(value) {
                    Ok((card, _)) => format!(":{}", card as i64),
                    Err(e) => error_reply(e),
                },
            },
            "PFCOUNT" => {
                let hlls: Vec<&[u8]> = args[1..]
                    .iter()
                    .filter_map(|k| self.keys.get(k).map(Vec::as_slice))
                    .collect();
                match hll::count_union(&hlls) {
                    Ok(card) => format!(":{}", card as i64),
                    Err(e) => error_reply(e),
                }
            }
            "PFMERGE" => {
                let dest = self.keys.get(&args[1]).map(Vec::as_slice);
                let sources: Vec<&[u8]> = args[2..]
                    .iter()
                    .filter_map(|k| self.keys.get(k).map(Vec::as_slice))
                    .collect();
                match hll::merge(dest, &sources, self.sparse_max_bytes) {
                    Ok(value) => {
                        self.keys.insert(args[1].clone(), value);
                        "+OK".to_owned()
                    }
                    Err(e) => error_reply(e),
                }
            }
            "GET" => match self.keys.get(&args[1]) {
                None => "$nil".to_owned(),
                Some(v) if expected.starts_with('#') => format!("#{}:{:016x}", v.len(), fnv1a64(v)),
                Some(v) => format!("${}", hex(v)),
            },
            "SET" => {
                self.keys.insert(args[1].clone(), args[2].clone());
                "+OK".to_owned()
            }
            "STRLEN" => format!(":{}", self.keys.get(&args[1]).map_or(0, Vec::len)),
            "EXISTS" => format!(":{}", u8::from(self.keys.contains_key(&args[1]))),
            "CONFIG" => {
                assert_eq!(args[2], b"hll-sparse-max-bytes");
                self.sparse_max_bytes = String::from_utf8_lossy(&args[3]).parse().unwrap();
                "+OK".to_owned()
            }
            other => panic!("command {other} is not in the replay"),
        }
    }
}

#[test]
fn hll_replays_redis_fixtures_byte_for_byte() {
    let mut server = Server {
        keys: HashMap::new(),
        sparse_max_bytes: hll::HLL_SPARSE_MAX_BYTES_DEFAULT,
    };
    let mut checked = 0;
    for (n, line) in SCRIPT.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (command, expected) = line.split_once(" => ").expect("fixture line");
        let args: Vec<Vec<u8>> = command.split(' ').flat_map(expand).collect();
        let got = server.run(&args, expected);
        assert_eq!(
            got,
            expected,
            "line {}: {}",
            n + 1,
            &command[..command.len().min(120)]
        );
        checked += 1;
    }
    assert!(checked > 2000, "only {checked} fixture lines");
}

#[test]
fn hll_new_sparse_is_what_pfadd_creates() {
    assert_eq!(
        hll::new_sparse(),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff".to_vec()
    );
    assert_eq!(hll::validate(&hll::new_sparse()), Ok(()));
}

fn elements(set: &std::collections::BTreeSet<Vec<u8>>) -> Vec<&[u8]> {
    set.iter().map(Vec::as_slice).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Counts are within Redis's error bound (standard error 0.81%; 5 sigma, plus slack for
    /// tiny sets), adding again changes nothing, and a dense copy counts the same.
    #[test]
    fn hll_count_within_bound_and_add_idempotent(
        set in prop::collection::btree_set(prop::collection::vec(any::<u8>(), 0..24), 0..3000),
        sparse_max in prop_oneof![Just(0usize), Just(300), Just(hll::HLL_SPARSE_MAX_BYTES_DEFAULT)],
    ) {
        let elements = elements(&set);
        let mut value = hll::new_sparse();
        hll::add(&mut value, &elements, sparse_max).unwrap();
        let (card, changed) = hll::count(&mut value).unwrap();
        prop_assert!(changed);
        let truth = set.len() as f64;
        prop_assert!((card as f64 - truth).abs() <= truth * 0.0081 * 5.0 + 2.0, "{card} vs {truth}");
        let before = value.clone();
        prop_assert_eq!(hll::add(&mut value, &elements, sparse_max), Ok(false));
        prop_assert_eq!(&value, &before);
        prop_assert_eq!(hll::count(&mut value).unwrap(), (card, false));

        // The same registers in dense form count the same.
        let mut dense = hll::new_sparse();
        hll::add(&mut dense, &elements, 0).unwrap();
        prop_assert!(hll::is_dense(&dense) || set.is_empty());
        prop_assert_eq!(hll::count(&mut dense).unwrap().0, card);
    }

    /// PFMERGE of parts counts what PFCOUNT of the parts and PFADD of everything count.
    #[test]
    fn hll_merge_and_union_agree(
        parts in prop::collection::vec(
            prop::collection::btree_set(prop::collection::vec(any::<u8>(), 0..12), 0..800),
            1..4,
        ),
    ) {
        let mut hlls = Vec::new();
        let mut all = hll::new_sparse();
        for part in &parts {
            let elements = elements(part);
            let mut value = hll::new_sparse();
            hll::add(&mut value, &elements, hll::HLL_SPARSE_MAX_BYTES_DEFAULT).unwrap();
            hll::add(&mut all, &elements, hll::HLL_SPARSE_MAX_BYTES_DEFAULT).unwrap();
            hlls.push(value);
        }
        let refs: Vec<&[u8]> = hlls.iter().map(Vec::as_slice).collect();
        let union = hll::count_union(&refs).unwrap();
        let mut merged = hll::merge(None, &refs, hll::HLL_SPARSE_MAX_BYTES_DEFAULT).unwrap();
        prop_assert_eq!(hll::count(&mut merged).unwrap().0, union);
        prop_assert_eq!(hll::count(&mut all).unwrap().0, union);
    }

    /// Arbitrary bytes behind a valid header: errors or results, never a panic.
    #[test]
    fn hll_arbitrary_payloads_never_panic(
        dense in any::<bool>(),
        card in any::<[u8; 8]>(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
        fill in any::<u8>(),
        elements in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), 0..40),
    ) {
        let mut value = b"HYLL".to_vec();
        value.push(u8::from(!dense));
        value.extend_from_slice(&[0, 0, 0]);
        value.extend_from_slice(&card);
        if dense {
            let mut registers = vec![fill; hll::DENSE_LEN - hll::HEADER_LEN];
            registers[..payload.len()].copy_from_slice(&payload);
            value.extend_from_slice(&registers);
        } else {
            value.extend_from_slice(&payload);
        }
        let elements: Vec<&[u8]> = elements.iter().map(Vec::as_slice).collect();
        let _ = hll::count(&mut value.clone());
        let _ = hll::count_union(&[&value, &value]);
        let _ = hll::merge(Some(&value), &[&value], 20);
        let _ = hll::merge(None, &[&value], hll::HLL_SPARSE_MAX_BYTES_DEFAULT);
        let mut added = value.clone();
        let _ = hll::add(&mut added, &elements, 40);
        let _ = hll::add(&mut value, &elements, hll::HLL_SPARSE_MAX_BYTES_DEFAULT);
        if dense {
            // A dense HLL is never corrupted.
            prop_assert!(hll::count(&mut value).is_ok());
        }
    }
}

#[test]
fn hll_bad_headers() {
    for bad in [
        &b""[..],
        b"HYLL",
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0",
        b"HYLM\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
        b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
        b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
    ] {
        assert_eq!(hll::validate(bad), Err(HllError::NotHll));
        assert_eq!(hll::count(&mut bad.to_vec()), Err(HllError::NotHll));
        assert_eq!(
            hll::add(&mut bad.to_vec(), &[b"a"], 3000),
            Err(HllError::NotHll)
        );
        assert_eq!(hll::merge(Some(bad), &[], 3000), Err(HllError::NotHll));
        assert_eq!(hll::count_union(&[bad]), Err(HllError::NotHll));
    }
    let corrupt = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7e\x7f";
    assert_eq!(hll::count(&mut corrupt.to_vec()), Err(HllError::Corrupted));
    assert_eq!(
        HllError::Corrupted.to_string(),
        "INVALIDOBJ Corrupted HLL object detected"
    );
}
