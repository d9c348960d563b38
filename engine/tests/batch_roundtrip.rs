//! Round trips of whole batches through the public API: builder → validate →
//! records for every codec, the broker's in-place writes, and a property test
//! over random records.

use bytes::Bytes;
use engine::batch::{
    batches, compute_crc, records, set_base_offset, set_log_append_time,
    set_partition_leader_epoch, validate_batch, BatchBuilder, BatchError, BatchHeader, Compression,
    Record,
};
use proptest::prelude::*;

const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// One record as the test writes it: timestamp, key, value, headers.
#[derive(Debug, Clone)]
struct Input {
    timestamp_ms: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn build(base_offset: i64, codec: Compression, inputs: &[Input]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(base_offset, codec).producer(1000, 5, 42, false);
    for (index, input) in inputs.iter().enumerate() {
        let headers: Vec<(&[u8], Option<&[u8]>)> = input
            .headers
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
            .collect();
        builder.push(
            index as i32,
            input.timestamp_ms,
            input.key.as_deref(),
            input.value.as_deref(),
            &headers,
        );
    }
    builder.build().unwrap()
}

/// Check that decoded records are exactly the inputs.
fn assert_records_match(decoded: &[Record], inputs: &[Input]) {
    assert_eq!(decoded.len(), inputs.len());
    let base_timestamp_ms = inputs.first().map_or(0, |input| input.timestamp_ms);
    for (index, (record, input)) in decoded.iter().zip(inputs).enumerate() {
        assert_eq!(record.offset_delta, index as i32);
        assert_eq!(
            record.timestamp_delta,
            input.timestamp_ms - base_timestamp_ms
        );
        assert_eq!(record.key.as_deref(), input.key.as_deref());
        assert_eq!(record.value.as_deref(), input.value.as_deref());
        let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = record
            .headers
            .iter()
            .map(|(key, value)| (key.to_vec(), value.as_ref().map(|value| value.to_vec())))
            .collect();
        assert_eq!(headers, input.headers);
        assert_eq!(record.attributes, 0);
    }
}

fn mixed_inputs() -> Vec<Input> {
    vec![
        Input {
            timestamp_ms: 1_700_000_000_000,
            key: Some(b"user-1".to_vec()),
            value: Some(b"{\"clicks\":3}".to_vec()),
            headers: vec![(b"trace".to_vec(), Some(b"abc".to_vec()))],
        },
        Input {
            timestamp_ms: 1_700_000_000_005,
            key: None,
            value: Some(vec![7u8; 3000]),
            headers: vec![],
        },
        Input {
            timestamp_ms: 1_699_999_999_990,
            key: Some(b"user-1".to_vec()),
            value: None, // tombstone
            headers: vec![(b"a".to_vec(), None), (b"".to_vec(), Some(b"".to_vec()))],
        },
        Input {
            timestamp_ms: 1_700_000_000_001,
            key: Some(Vec::new()),
            value: Some(Vec::new()),
            headers: vec![],
        },
    ]
}

#[test]
fn every_codec_round_trips_keys_nulls_and_headers() {
    let inputs = mixed_inputs();
    for codec in Compression::ALL {
        let buf = build(500, codec, &inputs);
        let header = validate_batch(&buf, MAX_MESSAGE_BYTES).unwrap();
        assert_eq!(header.compression(), Ok(codec));
        assert_eq!(header.base_offset, 500);
        assert_eq!(header.last_offset(), 503);
        assert_eq!(header.records_count, 4);
        assert_eq!(header.base_timestamp, 1_700_000_000_000);
        assert_eq!(header.max_timestamp, 1_700_000_000_005);
        assert_eq!(header.producer_id, 1000);
        assert_eq!(header.producer_epoch, 5);
        assert_eq!(header.base_sequence, 42);
        assert_records_match(&records(&buf).unwrap(), &inputs);
    }
}

#[test]
fn compression_shrinks_repetitive_batches() {
    let inputs: Vec<Input> = (0..100)
        .map(|index| Input {
            timestamp_ms: 1000 + index,
            key: Some(format!("key-{}", index % 10).into_bytes()),
            value: Some(b"the same sentence, over and over again. ".repeat(10)),
            headers: vec![],
        })
        .collect();
    let plain = build(0, Compression::None, &inputs).len();
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let packed = build(0, codec, &inputs);
        assert!(
            packed.len() * 4 < plain,
            "{codec:?}: {} vs {plain}",
            packed.len()
        );
        assert_records_match(&records(&packed).unwrap(), &inputs);
    }
}

#[test]
fn broker_writes_keep_the_batch_valid() {
    for codec in Compression::ALL {
        let mut buf = build(0, codec, &mixed_inputs());
        set_base_offset(&mut buf, 1 << 40);
        set_partition_leader_epoch(&mut buf, 17);
        let header = validate_batch(&buf, MAX_MESSAGE_BYTES).unwrap();
        assert_eq!(header.base_offset, 1 << 40);
        assert_eq!(header.partition_leader_epoch, 17);
        assert!(!header.timestamp_type_log_append());

        set_log_append_time(&mut buf, 1_800_000_000_000);
        let header = validate_batch(&buf, MAX_MESSAGE_BYTES).unwrap();
        assert!(header.timestamp_type_log_append());
        assert_eq!(header.max_timestamp, 1_800_000_000_000);
        assert_eq!(header.crc, compute_crc(&buf));
        assert_eq!(header.compression(), Ok(codec));
    }
}

#[test]
fn corruption_is_caught_for_every_codec() {
    for codec in Compression::ALL {
        let buf = build(0, codec, &mixed_inputs());
        let mut flipped = buf.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        assert!(
            matches!(
                validate_batch(&flipped, MAX_MESSAGE_BYTES),
                Err(BatchError::CorruptCrc { .. })
            ),
            "{codec:?}"
        );
        assert!(matches!(
            validate_batch(&buf[..buf.len() - 1], MAX_MESSAGE_BYTES),
            Err(BatchError::Incomplete { .. })
        ));
        assert!(matches!(
            validate_batch(&buf, 100),
            Err(BatchError::TooLarge { max_bytes: 100, .. })
        ));
        // Truncated in the middle of the compressed payload: records() must
        // fail cleanly (CRC is not its job).
        let mut cut = buf[..buf.len() - 5].to_vec();
        let batch_length = (cut.len() - 12) as i32;
        cut[8..12].copy_from_slice(&batch_length.to_be_bytes());
        assert!(records(&cut).is_err(), "{codec:?}");
    }
}

#[test]
fn produce_payload_of_several_batches() {
    let mut payload = Vec::new();
    let mut expected = Vec::new();
    for (index, codec) in Compression::ALL.into_iter().enumerate() {
        let buf = build(index as i64 * 10, codec, &mixed_inputs());
        expected.push((index as i64 * 10, payload.len()..payload.len() + buf.len()));
        payload.extend_from_slice(&buf);
    }
    let mut iter = batches(&payload);
    let found: Vec<(i64, std::ops::Range<usize>)> = iter
        .by_ref()
        .map(|item| {
            let (header, range) = item.unwrap();
            validate_batch(&payload[range.clone()], MAX_MESSAGE_BYTES).unwrap();
            (header.base_offset, range)
        })
        .collect();
    assert_eq!(found, expected);
    assert_eq!(iter.remainder_bytes(), 0);
    assert_eq!(iter.consumed_bytes(), payload.len());
}

#[test]
fn records_share_one_allocation() {
    let buf = build(0, Compression::None, &mixed_inputs());
    let decoded = records(&buf).unwrap();
    let key: &Bytes = decoded[0].key.as_ref().unwrap();
    let value: &Bytes = decoded[0].value.as_ref().unwrap();
    // Slices of one buffer: the value follows the key in memory.
    assert!(value.as_ptr() > key.as_ptr());
    assert_eq!(
        BatchHeader::parse(&buf).unwrap().records_count,
        decoded.len() as i32
    );
}

fn input_strategy() -> impl Strategy<Value = Input> {
    let bytes = proptest::collection::vec(any::<u8>(), 0..200);
    (
        -1_000_000i64..1_000_000,
        proptest::option::of(bytes.clone()),
        proptest::option::of(bytes.clone()),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..20),
                proptest::option::of(bytes),
            ),
            0..4,
        ),
    )
        .prop_map(|(timestamp_ms, key, value, headers)| Input {
            timestamp_ms: 1_700_000_000_000 + timestamp_ms,
            key,
            value,
            headers,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_records_round_trip_through_every_codec(
        inputs in proptest::collection::vec(input_strategy(), 0..40),
        base_offset in 0i64..(1 << 50),
    ) {
        for codec in Compression::ALL {
            let buf = build(base_offset, codec, &inputs);
            let header = validate_batch(&buf, MAX_MESSAGE_BYTES).unwrap();
            prop_assert_eq!(header.records_count as usize, inputs.len());
            prop_assert_eq!(header.total_bytes(), buf.len());
            if let Some(max_timestamp_ms) = inputs.iter().map(|input| input.timestamp_ms).max() {
                prop_assert_eq!(header.max_timestamp, max_timestamp_ms);
                prop_assert_eq!(header.last_offset(), base_offset + inputs.len() as i64 - 1);
            }
            assert_records_match(&records(&buf).unwrap(), &inputs);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = BatchHeader::parse(&data);
        let _ = validate_batch(&data, MAX_MESSAGE_BYTES);
        let _ = records(&data);
        for item in batches(&data).flatten() {
            let _ = records(&data[item.1]);
        }
    }
}
