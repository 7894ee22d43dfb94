// A KafkaJS group consumer for tests/interop/test_group_consumers.py: subscribes GROUP to the
// quorum's topic, prints one JSON line per record whose value starts with PREFIX, and stops
// (committing its offsets, as KafkaJS does on disconnect) once WANT such records were seen
// or after TIMEOUT_MS.
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, group, prefix, want, timeoutMs] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-interop', brokers: bootstrap.split(','), logLevel: logLevel.WARN })
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500,
                                  rebalanceTimeout: 10000 })

async function main () {
  let seen = 0
  let done
  const finished = new Promise(resolve => { done = resolve })
  const timer = setTimeout(() => done(), Number(timeoutMs))
  await consumer.connect()
  await consumer.subscribe({ topic: '__cluster_metadata', fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const value = message.value ? message.value.toString('latin1') : ''
      if (value.startsWith(prefix)) {
        console.log(JSON.stringify({ partition, offset: Number(message.offset), value }))
        seen += 1
        if (seen >= Number(want)) done()
      }
    }
  })
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1) })
