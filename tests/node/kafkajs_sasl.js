// KafkaJS logging in to a SASL_PLAINTEXT listener with each mechanism it
// has, driven by tests/tests/kafkajs.rs:
//
//     node kafkajs_sasl.js BOOTSTRAP
//
// PLAIN as alice/alice-secret, SCRAM-SHA-256 and SCRAM-SHA-512 as
// bob/bob-secret, OAUTHBEARER with an unsigned token for carol; each
// produces one record to topic `sasl-<mechanism>`. Prints one JSON line:
// {"<mechanism>": "ok" | "<error message>"}.

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap] = process.argv.slice(2)
const part = value => Buffer.from(JSON.stringify(value)).toString('base64url')
const unsignedToken = sub => {
  const now = Math.floor(Date.now() / 1000)
  return part({ alg: 'none' }) + '.' + part({ sub, iat: now, exp: now + 600 }) + '.'
}
const mechanisms = {
  plain: { mechanism: 'plain', username: 'alice', password: 'alice-secret' },
  'scram-sha-256': { mechanism: 'scram-sha-256', username: 'bob', password: 'bob-secret' },
  'scram-sha-512': { mechanism: 'scram-sha-512', username: 'bob', password: 'bob-secret' },
  oauthbearer: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unsignedToken('carol') }) }
}

async function main () {
  const outcome = {}
  for (const [name, sasl] of Object.entries(mechanisms)) {
    const kafka = new Kafka({ clientId: 'rill-kafkajs-sasl', brokers: [bootstrap], sasl, logLevel: logLevel.NOTHING })
    const producer = kafka.producer({ allowAutoTopicCreation: true })
    try {
      await producer.connect()
      await producer.send({ topic: 'sasl-' + name, acks: -1, messages: [{ value: name }] })
      outcome[name] = 'ok'
    } catch (e) {
      outcome[name] = String(e.message)
    } finally {
      await producer.disconnect()
    }
  }
  console.log(JSON.stringify(outcome))
}

main()
