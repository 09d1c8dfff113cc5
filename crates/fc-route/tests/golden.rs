//! Golden vectors for the routing contract. These values were produced by the C reference
//! implementation of XXH3-64 (python `xxhash` 3.x, `xxh3_64_intdigest`), not by this crate, so a
//! change in the hash, the seed, the tag rule or the shard mapping fails here.
//! Never edit an expected value: a change here breaks every client and every file on disk.

use fc_route::{EmbeddedRouteMode, ShardRouter, hash_bytes};

const VECTORS: &[(&[u8], u64)] = &[
    (b"", 0x2d06_8005_38d3_94c2),
    (b"a", 0xe6c6_32b6_1e96_4e1f),
    (b"abc", 0x78af_5f94_892f_3950),
    (b"user:42", 0x9fc1_e605_fa71_74aa),
    (b"session:1", 0x1bc3_e00c_f995_0d9e),
    (b"session:1:layer:0", 0xd3a0_3ac8_5926_66a6),
    (b"{user1000}.following", 0xf01a_3a54_c0f4_68a5),
    (b"user1000", 0xb03c_8988_cdc1_c874),
];

#[test]
fn xxh3_64_matches_reference() {
    for (key, expected) in VECTORS {
        assert_eq!(
            hash_bytes(key),
            *expected,
            "key {:?}",
            String::from_utf8_lossy(key)
        );
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(hash_bytes(&all), 0x9408_a443_3b95_2d71);
    assert_eq!(hash_bytes(&[b'x'; 1000]), 0xc0a4_877b_962c_ba82);
}

#[test]
fn shard_mapping_is_top_bits_of_route_hash() {
    let r16 = ShardRouter::new(16, EmbeddedRouteMode::FullKey);
    let r256 = ShardRouter::new(256, EmbeddedRouteMode::FullKey);
    let expect: &[(&[u8], usize, usize)] = &[
        (b"", 2, 45),
        (b"a", 14, 230),
        (b"abc", 7, 120),
        (b"user:42", 9, 159),
        (b"session:1", 1, 27),
        (b"session:1:layer:0", 13, 211),
    ];
    for (key, s16, s256) in expect {
        assert_eq!(r16.shard_of(&r16.route_key(key)), *s16);
        assert_eq!(r256.shard_of(&r256.route_key(key)), *s256);
    }
}

#[test]
fn hash_tag_routes_on_the_tag() {
    let r = ShardRouter::new(16, EmbeddedRouteMode::FullKey);
    let route = r.route_key(b"{user1000}.following");
    assert_eq!(route.route_hash(), 0xb03c_8988_cdc1_c874); // hash of "user1000"
    assert_eq!(route.key_hash(), 0xf01a_3a54_c0f4_68a5); // hash of the whole key
    assert_eq!(r.shard_of(&route), 11);
}

#[test]
fn session_prefix_mode_routes_on_the_session() {
    let r = ShardRouter::new(16, EmbeddedRouteMode::session_prefix());
    let route = r.route_key(b"session:1:layer:0");
    assert_eq!(route.route_hash(), 0x1bc3_e00c_f995_0d9e); // hash of "session:1"
    assert_eq!(route.key_hash(), 0xd3a0_3ac8_5926_66a6);
    assert_eq!(r.shard_of(&route), 1);
    let session = r.route_session(b"session:1");
    assert_eq!(r.session_shard(&session), 1);
    assert_eq!(
        r.route_session_key(&session, b"session:1", b"session:1:layer:0"),
        route
    );
}

#[test]
fn invalid_shard_counts_are_named() {
    for bad in [0usize, 3, 6, 12, 100, (1 << 16) + 1, 1 << 17] {
        let err = ShardRouter::try_new(bad, EmbeddedRouteMode::FullKey).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&format!("invalid shard count {bad}")), "{msg}");
    }
    for good in [1usize, 2, 4, 1024, 1 << 16] {
        assert_eq!(
            ShardRouter::new(good, EmbeddedRouteMode::FullKey).shard_count(),
            good
        );
    }
}

#[test]
#[should_panic(expected = "invalid shard count 12")]
fn new_panics_with_the_same_message() {
    let _ = ShardRouter::new(12, EmbeddedRouteMode::FullKey);
}
