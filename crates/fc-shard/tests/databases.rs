//! Databases as key namespaces (`fc_route::namespaced`): a model-based property test of the
//! per-database counts (`db_counts`, what `DBSIZE` and `INFO keyspace` read), `clear_db`
//! (`FLUSHDB`), `swap_dbs` (`SWAPDB`), renames between databases (`MOVE`) and scans that
//! see one database only, against a map of `(db, key) -> expiring`.

use std::collections::{BTreeMap, BTreeSet};

use fc_shard::{EmbeddedRouteMode, EmbeddedStore, LocalEmbeddedStore, ScanOptions, namespaced};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set { db: u32, key: u8, ttl: bool },
    HSet { db: u32, key: u8 },
    Delete { db: u32, key: u8 },
    Persist { db: u32, key: u8 },
    Move { db: u32, key: u8, to: u32 },
    FlushDb { db: u32 },
    Swap { a: u32, b: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    let db = 0u32..4;
    let key = 0u8..12;
    prop_oneof![
        4 => (db.clone(), key.clone(), any::<bool>()).prop_map(|(db, key, ttl)| Op::Set { db, key, ttl }),
        2 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::HSet { db, key }),
        2 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Delete { db, key }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Persist { db, key }),
        2 => (db.clone(), key.clone(), db.clone()).prop_map(|(db, key, to)| Op::Move { db, key, to }),
        1 => db.clone().prop_map(|db| Op::FlushDb { db }),
        1 => (db.clone(), db).prop_map(|(a, b)| Op::Swap { a, b }),
    ]
}

/// A key name; some begin with the namespace mark, which database 0 must escape.
fn name(key: u8) -> Vec<u8> {
    if key % 4 == 3 {
        vec![0xFF, b'1', b':', key]
    } else {
        format!("key:{key}").into_bytes()
    }
}

type Model = BTreeMap<(u32, Vec<u8>), bool>;

fn apply(store: &mut LocalEmbeddedStore, model: &mut Model, op: &Op) {
    match *op {
        Op::Set { db, key, ttl } => {
            let k = namespaced(db, &name(key));
            store.set(&k, b"v", ttl.then_some(1_000_000));
            model.insert((db, name(key)), ttl);
        }
        Op::HSet { db, key } => {
            let k = namespaced(db, &name(key));
            let pairs: [(&[u8], &[u8]); 1] = [(b"f", b"v")];
            if store.hset(&k, &pairs).is_ok() {
                model.entry((db, name(key))).or_insert(false);
            }
        }
        Op::Delete { db, key } => {
            store.try_delete(&namespaced(db, &name(key))).unwrap();
            model.remove(&(db, name(key)));
        }
        Op::Persist { db, key } => {
            store.persist(&namespaced(db, &name(key)));
            if let Some(expiring) = model.get_mut(&(db, name(key))) {
                *expiring = false;
            }
        }
        Op::Move { db, key, to } => {
            let (from, dest) = (namespaced(db, &name(key)), namespaced(to, &name(key)));
            let moved = store.rename(&from, &dest, true);
            let present = model.contains_key(&(db, name(key)));
            let taken = model.contains_key(&(to, name(key)));
            match moved {
                Ok(true) => {
                    assert!(present && (!taken || db == to));
                    let expiring = model.remove(&(db, name(key))).unwrap();
                    model.insert((to, name(key)), expiring);
                }
                Ok(false) => assert!(taken),
                Err(_) => assert!(!present),
            }
        }
        Op::FlushDb { db } => {
            store.clear_db(db);
            model.retain(|(d, _), _| *d != db);
        }
        Op::Swap { a, b } => {
            store.swap_dbs(a, b);
            let swapped: Model = std::mem::take(model)
                .into_iter()
                .map(|((d, k), e)| {
                    let d = if d == a {
                        b
                    } else if d == b {
                        a
                    } else {
                        d
                    };
                    ((d, k), e)
                })
                .collect();
            *model = swapped;
        }
    }
}

fn scan_db(store: &mut LocalEmbeddedStore, db: u32) -> BTreeSet<Vec<u8>> {
    let options = ScanOptions {
        count: 3,
        db,
        ..ScanOptions::default()
    };
    let (mut cursor, mut found) = (0, BTreeSet::new());
    loop {
        let (next, keys) = store.scan(cursor, options);
        found.extend(keys);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn counts_scans_flushes_and_swaps_follow_the_model(ops in prop::collection::vec(op(), 1..80)) {
        let mut store = EmbeddedStore::builder(4)
            .route_mode(EmbeddedRouteMode::Namespaced)
            .build()
            .into_local_stores(1)
            .pop()
            .unwrap();
        let mut model = Model::new();
        for op in &ops {
            apply(&mut store, &mut model, op);
            let mut want: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            for ((db, _), expiring) in &model {
                let c = want.entry(*db).or_default();
                c.0 += 1;
                c.1 += u64::from(*expiring);
            }
            prop_assert_eq!(store.db_counts(), want.clone(), "after {:?}", op);
            prop_assert_eq!(store.len() as u64, want.values().map(|c| c.0).sum::<u64>());
            for db in 0..4 {
                prop_assert_eq!(store.db_len(db) as u64, want.get(&db).map_or(0, |c| c.0));
                let keys: BTreeSet<Vec<u8>> =
                    model.keys().filter(|(d, _)| *d == db).map(|(_, k)| k.clone()).collect();
                prop_assert_eq!(scan_db(&mut store, db), keys, "scan of db {}", db);
            }
        }
    }
}

#[test]
#[should_panic(expected = "Namespaced route mode")]
fn swapping_databases_needs_the_namespaced_route_mode() {
    let mut store = EmbeddedStore::new(4).into_local_stores(1).pop().unwrap();
    store.swap_dbs(0, 1);
}
