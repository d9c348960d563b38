//! A broker whose data disk fills hands its leaderships and ISR places to
//! the replicas that can still write (issue #31, as KIP-858 does for a
//! failed log dir), so acks=all produce goes on without it; it rejoins the
//! ISR once it has space again.
//!
//! Three brokers; broker 3's data dir is a small ext4 file system (a loop
//! mount: root only, skipped with a message elsewhere), which a ballast
//! file fills below its free-space reserve. Its heartbeat then names every
//! partition it holds as unwritable, and the controller elects leaders
//! from the others and drops it from the ISRs; a leader's AlterPartition
//! that would put it back is refused (INELIGIBLE_REPLICA) while the disk
//! stays full.
//!
//! What must hold: while broker 3's disk is full, it leads nothing and is
//! in no ISR, and an idempotent acks=all producer's records are all
//! acknowledged; once the ballast is gone, every ISR is whole again; every
//! acknowledged record reads back, once.

use rill_tests::cluster::wait_for;
use rill_tests::replicated::{idempotent_producer, leaders_and_isrs};
use rill_tests::small_fs::SmallFs;
use rill_tests::Broker;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const TOPIC: &str = "moving";
const PARTITIONS: i32 = 3;

#[test]
fn a_broker_whose_disk_fills_hands_over_its_leaderships_and_isr_places() {
    let disk = match SmallFs::mount(64) {
        Ok(disk) => disk,
        Err(why) => return rill_tests::skipped(&format!("no small file system here ({why})")),
    };
    let dirs: Vec<_> = (0..3).map(|_| rill_tests::data_dir()).collect();
    let brokers = cluster(&disk, &dirs);
    let bootstrap: String = (brokers.iter().map(Broker::bootstrap))
        .collect::<Vec<_>>()
        .join(",");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    ));
    wait_for("every ISR whole", SETTLE, || {
        let views = partitions(&bootstrap)?;
        views.iter().all(|(_, isr)| *isr == [1, 2, 3]).then_some(())
    });
    let led = partitions(&bootstrap).expect("metadata");
    assert!(
        led.iter().any(|(leader, _)| *leader == 3),
        "broker 3 leads one: {led:?}"
    );
    let producer = idempotent_producer(&bootstrap);
    produce(&runtime, &producer, 0..30);

    // Below the reserve: broker 3 can append nowhere.
    let ballast = disk.fill_leaving(1 << 20);
    let filled = Instant::now();
    wait_for("broker 3 out of every leadership and ISR", SETTLE, || {
        let views = partitions(&bootstrap)?;
        let out = |(leader, isr): &(i32, Vec<i32>)| *leader != 3 && !isr.contains(&3);
        views.iter().all(out).then_some(())
    });
    eprintln!(
        "broker 3 left every leadership and ISR {} ms after its disk filled",
        filled.elapsed().as_millis()
    );
    produce(&runtime, &producer, 30..90);
    // Still out while the disk stays full (its catch-up is refused).
    std::thread::sleep(Duration::from_secs(3));
    let views = partitions(&bootstrap).expect("metadata");
    assert!(views.iter().all(|(_, isr)| !isr.contains(&3)), "{views:?}");

    std::fs::remove_file(&ballast).expect("ballast removed");
    wait_for("every ISR whole again", SETTLE, || {
        let views = partitions(&bootstrap)?;
        views.iter().all(|(_, isr)| *isr == [1, 2, 3]).then_some(())
    });
    produce(&runtime, &producer, 90..120);
    let read = rill_tests::kafka::consume_all(&bootstrap, TOPIC, PARTITIONS, 120, SETTLE, &[]);
    let mut values: Vec<u32> = (read.iter())
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..120).collect::<Vec<u32>>(), "each record once");
    drop(brokers);
}

/// Brokers 1 and 2 on the main disk, broker 3 with its data dir on
/// `disk`; logs in `dirs`.
fn cluster(disk: &SmallFs, dirs: &[tempfile::TempDir]) -> Vec<Broker> {
    let voters: Vec<String> = (1..=3)
        .map(|id| format!("{id}@127.0.0.1:{}", rill_tests::free_port()))
        .collect();
    let voters = voters.join(",");
    let brokers: Vec<Broker> = (1..=3)
        .map(|id: usize| {
            let id_text = id.to_string();
            let args = [
                "--cores",
                "1",
                "--node-id",
                &id_text,
                "--controller-quorum-voters",
                &voters,
            ];
            let log_dir = dirs[id - 1].path();
            let data = match id {
                3 => disk.dir("data"),
                _ => log_dir.join("data"),
            };
            Broker::start_logging_to(RILL, &data, log_dir, &args)
        })
        .collect();
    for broker in &brokers {
        wait_for("every broker to list all three", SETTLE, || {
            let (_, ids) = rill_tests::cluster::describe_cluster(broker).ok()?;
            (ids == [1, 2, 3]).then_some(())
        });
    }
    brokers
}

/// Each partition's leader and sorted ISR, once metadata lists all
/// `PARTITIONS` (an empty answer would pass any `all`).
fn partitions(bootstrap: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    let views = leaders_and_isrs(bootstrap, TOPIC)?;
    (views.len() == PARTITIONS as usize).then_some(views)
}

/// Sends `values` (keyed, over every partition), all at once; every one
/// must be acknowledged (`produce_all` fails the test otherwise).
fn produce(
    runtime: &tokio::runtime::Runtime,
    producer: &rdkafka::producer::FutureProducer,
    values: std::ops::Range<u32>,
) {
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = values
        .map(|v| (Some(v.to_string().into_bytes()), v.to_string().into_bytes()))
        .collect();
    runtime.block_on(rill_tests::kafka::produce_all(
        producer, TOPIC, &records, None,
    ));
}
