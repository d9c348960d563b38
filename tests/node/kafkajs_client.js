// KafkaJS against a broker, driven by tests/tests/kafkajs.rs:
//
//     node kafkajs_client.js BOOTSTRAP TOPIC
//
// Creates TOPIC (3 partitions) with the admin client, starts two consumers
// of one group (KafkaJS's own JoinGroup/SyncGroup and round-robin
// assignor, read_committed) and waits until they split the partitions,
// produces 30 keyed records gzip-compressed with an idempotent producer
// (acks=all), commits one transaction and aborts another, and reads
// everything back. Prints one JSON line with what each step saw; the Rust
// test checks it. Any failure prints {"error": "..."} and exits 1.

const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const [bootstrap, topic] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'rill-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING })
const GROUP = topic + '-group'

async function produce () {
  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  const messages = []
  for (let i = 0; i < 30; i++) messages.push({ key: 'key-' + (i % 6), value: 'v' + i })
  const acks = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages })
  await producer.disconnect()
  return acks.map(a => a.errorCode)
}

async function transactions () {
  const producer = kafka.producer({ transactionalId: topic + '-tx', idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const committed = await producer.transaction()
  await committed.send({ topic, messages: [{ key: 'tx', value: 'committed' }] })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: [{ key: 'tx', value: 'aborted' }] })
  await aborted.abort()
  await producer.disconnect()
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// Polls `ready` every 100 ms until it holds or `ms` pass.
async function waitFor (ready, ms) {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(100)) {
    if (ready()) return true
  }
  return ready()
}

// Two members of one group, started; resolves once their latest
// assignments are disjoint and cover the topic's 3 partitions.
async function startGroup (seen) {
  const assignments = {}
  const consumers = [0, 1].map(() => kafka.consumer({ groupId: GROUP, readUncommitted: false }))
  for (const [index, consumer] of consumers.entries()) {
    consumer.on(consumer.events.GROUP_JOIN, e => { assignments[index] = e.payload.memberAssignment[topic] || [] })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()) } })
  }
  const split = () => {
    const [a, b] = [assignments[0] || [], assignments[1] || []]
    return a.length > 0 && b.length > 0 && new Set([...a, ...b]).size === 3 && a.length + b.length === 3
  }
  const settled = await waitFor(split, 30000)
  return { consumers, assignments: JSON.parse(JSON.stringify(assignments)), settled }
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
  const seen = []
  const { consumers, assignments, settled } = await startGroup(seen)
  const produced = await produce()
  await transactions()
  // 30 plain records and the committed one.
  await waitFor(() => seen.length >= 31, 60000)
  const stable = (await admin.describeGroups([GROUP])).groups[0]
  // Let the auto-commit of the last batch go out before leaving.
  await sleep(1500)
  for (const consumer of consumers) await consumer.disconnect()
  const byPartition = rows => rows.sort((x, y) => x.partition - y.partition).map(r => Number(r.offset || r.high))
  const committed = byPartition((await admin.fetchOffsets({ groupId: GROUP, topics: [topic] }))[0].partitions)
  const ends = byPartition(await admin.fetchTopicOffsets(topic))
  const emptied = (await admin.describeGroups([GROUP])).groups[0].state
  await admin.disconnect()
  console.log(JSON.stringify({
    created,
    produced,
    settled,
    assignments,
    members: stable.members.length,
    seen: seen.sort(),
    committed,
    ends,
    emptied
  }))
}

main().catch(e => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }))
  process.exit(1)
})
