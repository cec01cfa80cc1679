// sarama-client: produce, consume and commit with the Sarama client at a chosen protocol version, so the
// interoperability tests (tests/interop) can pit Sarama against kafka-python and the Java client on a
// kafkette cluster. Sarama's own console tools have no flag for the protocol version and cannot commit
// offsets in a consumer group; this program can.
//
// Every subcommand prints one JSON object per line on stdout (records, acknowledgements, offsets) and
// exits 0, or prints the error on stderr and exits 1. Usage:
//
//	sarama-client produce  -brokers B -version V -topic T -count N [-partition P] [-prefix S] [-compression C]
//	sarama-client consume  -brokers B -version V -topic T -count N
//	sarama-client group    -brokers B -version V -topic T -group G -count N
//	sarama-client commit   -brokers B -version V -topic T -group G -partition P -offset O
//	sarama-client offsets  -brokers B -version V -topic T -group G
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type options struct {
	brokers     []string
	version     sarama.KafkaVersion
	topic       string
	group       string
	count       int
	partition   int
	offset      int64
	prefix      string
	compression string
	timeout     time.Duration
}

// record is what consume and group print for every record they receive.
type record struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Timestamp int64  `json:"timestamp_ms"`
}

var out = json.NewEncoder(os.Stdout)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: sarama-client produce|consume|group|commit|offsets [flags]"))
	}
	command := os.Args[1]
	opts, err := parseFlags(command, os.Args[2:])
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	switch command {
	case "produce":
		err = produce(opts)
	case "consume":
		err = consume(ctx, opts)
	case "group":
		err = group(ctx, opts)
	case "commit":
		err = commit(opts)
	case "offsets":
		err = offsets(opts)
	default:
		err = fmt.Errorf("unknown command %q", command)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sarama-client:", err)
	os.Exit(1)
}

func parseFlags(command string, args []string) (options, error) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	brokers := fs.String("brokers", "localhost:9092", "comma-separated bootstrap servers")
	version := fs.String("version", "3.9.0", "Kafka protocol version Sarama speaks, e.g. 0.10.2.0, 1.0.0, 3.9.0")
	var o options
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.group, "group", "", "consumer group id")
	fs.IntVar(&o.count, "count", 0, "records to produce or to receive")
	fs.IntVar(&o.partition, "partition", -1, "partition (produce: -1 lets the hash partitioner choose)")
	fs.Int64Var(&o.offset, "offset", -1, "offset to commit")
	fs.StringVar(&o.prefix, "prefix", "sarama", "produce: keys are <prefix>-key-<i>, values <prefix>-value-<i>")
	fs.StringVar(&o.compression, "compression", "none", "produce: none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.brokers = strings.Split(*brokers, ",")
	v, err := sarama.ParseKafkaVersion(*version)
	if err != nil {
		return o, err
	}
	o.version = v
	return o, nil
}

func config(o options) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = o.version
	c.ClientID = "sarama-client"
	// Topics are created by the tests: a typo must fail, not create a topic.
	c.Metadata.AllowAutoTopicCreation = false
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	return c
}

func produce(o options) error {
	c := config(o)
	if err := c.Producer.Compression.UnmarshalText([]byte(o.compression)); err != nil {
		return err
	}
	if o.partition >= 0 {
		c.Producer.Partitioner = sarama.NewManualPartitioner
	}
	producer, err := sarama.NewSyncProducer(o.brokers, c)
	if err != nil {
		return err
	}
	defer producer.Close()
	for i := 0; i < o.count; i++ {
		key := fmt.Sprintf("%s-key-%d", o.prefix, i)
		value := fmt.Sprintf("%s-value-%d", o.prefix, i)
		msg := &sarama.ProducerMessage{Topic: o.topic, Partition: int32(o.partition),
			Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
		p, off, err := producer.SendMessage(msg)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := out.Encode(record{Partition: p, Offset: off, Key: key, Value: value}); err != nil {
			return err
		}
	}
	return nil
}

// consume reads every partition of the topic from its oldest offset until count records came in.
func consume(ctx context.Context, o options) error {
	consumer, err := sarama.NewConsumer(o.brokers, config(o))
	if err != nil {
		return err
	}
	defer consumer.Close()
	partitions, err := consumer.Partitions(o.topic)
	if err != nil {
		return err
	}
	records := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(partitions))
	for _, p := range partitions {
		pc, err := consumer.ConsumePartition(o.topic, p, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case records <- m:
					case <-ctx.Done():
						return
					}
				case e, ok := <-pc.Errors():
					if ok {
						errs <- e
					}
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for received := 0; received < o.count; received++ {
		select {
		case m := <-records:
			if err := printRecord(m); err != nil {
				return err
			}
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("received %d of %d records: %w", received, o.count, ctx.Err())
		}
	}
	return nil
}

func printRecord(m *sarama.ConsumerMessage) error {
	return out.Encode(record{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value),
		Timestamp: m.Timestamp.UnixMilli()})
}

// groupHandler takes count records in total across the claims of one generation, marks each, and commits
// once it has them all.
type groupHandler struct {
	mu       sync.Mutex
	count    int
	received int
	done     chan struct{}
	err      error
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.received < h.count {
			if err := printRecord(m); err != nil {
				h.err = err
			}
			session.MarkMessage(m, "")
			h.received++
			if h.received == h.count {
				session.Commit()
				close(h.done)
			}
		}
		h.mu.Unlock()
	}
	return nil
}

// group joins the consumer group, starts where the group's committed offsets say (the oldest offset
// where it has none), takes count records, commits their offsets and leaves.
func group(ctx context.Context, o options) error {
	client, err := sarama.NewClient(o.brokers, config(o))
	if err != nil {
		return err
	}
	defer client.Close()
	cg, err := sarama.NewConsumerGroupFromClient(o.group, client)
	if err != nil {
		return err
	}
	// Leave the group on every path: a member left behind keeps the group from accepting commits made
	// outside a generation until its session times out.
	defer cg.Close()
	h := &groupHandler{count: o.count, done: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	consumed := make(chan error, 1)
	go func() {
		for runCtx.Err() == nil {
			if err := cg.Consume(runCtx, []string{o.topic}, h); err != nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	select {
	case <-h.done:
	case err := <-cg.Errors():
		return err
	case err := <-consumed:
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("group session ended after %d of %d records: %w", h.received, o.count, err)
	case <-ctx.Done():
		return fmt.Errorf("received %d of %d records: %w", h.received, o.count, ctx.Err())
	}
	stop()
	<-consumed
	if err := cg.Close(); err != nil {
		return err
	}
	return h.err
}

// commit stores one partition's offset for the group, as a client outside any generation does.
func commit(o options) error {
	client, err := sarama.NewClient(o.brokers, config(o))
	if err != nil {
		return err
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(o.group, client)
	if err != nil {
		return err
	}
	pom, err := om.ManagePartition(o.topic, int32(o.partition))
	if err != nil {
		return err
	}
	// MarkOffset only moves forward and ResetOffset only back: whichever applies.
	if next, _ := pom.NextOffset(); o.offset > next {
		pom.MarkOffset(o.offset, "")
	} else {
		pom.ResetOffset(o.offset, "")
	}
	om.Commit()
	// The partition manager's error channel closes once the offset manager has released it.
	pom.AsyncClose()
	if err := om.Close(); err != nil {
		return err
	}
	for perr := range pom.Errors() {
		return perr
	}
	return out.Encode(map[string]any{"partition": o.partition, "offset": o.offset})
}

// offsets prints the group's committed offset of every partition of the topic (-1: none).
func offsets(o options) error {
	client, err := sarama.NewClient(o.brokers, config(o))
	if err != nil {
		return err
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return err
	}
	partitions, err := client.Partitions(o.topic)
	if err != nil {
		return err
	}
	resp, err := admin.ListConsumerGroupOffsets(o.group, map[string][]int32{o.topic: partitions})
	if err != nil {
		return err
	}
	if resp.Err != sarama.ErrNoError {
		return resp.Err
	}
	sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
	for _, p := range partitions {
		block := resp.GetBlock(o.topic, p)
		if block == nil {
			return fmt.Errorf("no offset block for partition %d", p)
		}
		if block.Err != sarama.ErrNoError {
			return fmt.Errorf("partition %d: %w", p, block.Err)
		}
		if err := out.Encode(map[string]any{"partition": p, "offset": block.Offset}); err != nil {
			return err
		}
	}
	return nil
}
