// An old-era Kafka client against rill: Debian's sarama 1.22 configured for
// Kafka 2.2, as a new user would run it. It creates a topic, produces, reads
// part of it in a consumer group (sarama commits with OffsetCommit v1),
// closes, reopens the group and prints the first offset it then reads: the
// committed one, not 0, when commits are accepted.
//
// Built and run by tests/tests/old_clients.rs. Usage: sarama-old <broker> <topic> <group> <total> <first-read>
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

type handler struct {
	limit int
	seen  []int64
	done  chan struct{}
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		if len(h.seen) >= h.limit {
			break
		}
		h.seen = append(h.seen, msg.Offset)
		s.MarkMessage(msg, "")
		if len(h.seen) == h.limit {
			close(h.done)
			return nil
		}
	}
	return nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_2_0_0
	c.ClientID = "sarama-old"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = true
	return c
}

// consume reads `limit` records in group `group` and returns their offsets;
// closing the group commits what was marked.
func consume(broker, topic, group string, limit int) []int64 {
	g, err := sarama.NewConsumerGroup([]string{broker}, group, config())
	if err != nil {
		fail("consumer group: %v", err)
	}
	go func() {
		for err := range g.Errors() {
			fmt.Fprintf(os.Stderr, "group error: %v\n", err)
		}
	}()
	h := &handler{limit: limit, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				fmt.Fprintf(os.Stderr, "consume: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		fail("timed out after %d of %d records", len(h.seen), limit)
	}
	cancel()
	if err := g.Close(); err != nil {
		fail("close: %v", err)
	}
	return h.seen
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama-old <broker> <topic> <group> <total> <first-read>")
	}
	broker, topic, group := os.Args[1], os.Args[2], os.Args[3]
	total, _ := strconv.Atoi(os.Args[4])
	first, _ := strconv.Atoi(os.Args[5])

	admin, err := sarama.NewClusterAdmin([]string{broker}, config())
	if err != nil {
		fail("admin: %v", err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		fail("create topic: %v", err)
	}
	admin.Close()

	producer, err := sarama.NewSyncProducer([]string{broker}, config())
	if err != nil {
		fail("producer: %v", err)
	}
	for i := 0; i < total; i++ {
		msg := &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("v-%d", i))}
		if _, _, err := producer.SendMessage(msg); err != nil {
			fail("produce %d: %v", i, err)
		}
	}
	producer.Close()

	before := consume(broker, topic, group, first)
	after := consume(broker, topic, group, total-first)
	fmt.Printf("first=%v\nsecond=%v\n", before, after)
}
