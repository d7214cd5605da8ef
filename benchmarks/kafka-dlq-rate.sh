#!/usr/bin/env bash
# Rate at which the kafka destination sends records the broker would refuse to the dead-letter
# queue (issue 13): a topic with max.message.bytes=2048 (the producer's own limit stays at its
# 1 MB default, so sluice does not refuse them by its client limit), RECORDS records of which
# every EVERY-th is 2,500 bytes, on_error: dlq into a file. Prints rejects/s for one mode.
# Usage: benchmarks/kafka-dlq-rate.sh [plain|transactions] [RECORDS] [EVERY] [sluice|compressed|broker]
# compressed: lz4 compression and random hex values lz4 cannot shrink: sluice compresses each
# oversize message on its own to know it is still too large. broker: the same with
# compression.size_check off, so the broker itself refuses each oversize record (the slow path:
# an epoch bump per refusal).
# Needs: build/sluice, a broker at $SLUICE_TEST_KAFKA_BROKERS (scripts/services start kafka), java
# with the Kafka jars scripts/services downloaded (for kafka-topics).
set -euo pipefail
mode=${1:-plain} records=${2:-20000} every=${3:-2} who=${4:-sluice}
brokers=${SLUICE_TEST_KAFKA_BROKERS:?start kafka with scripts/services and export its variables}
root=$(cd "$(dirname "$0")/.." && pwd)
jars=$(ls -d "${HOME:-/root}"/.cache/sluice/kafka-*/lib | tail -1)
dir=$(mktemp -d /tmp/kafka-dlq-rate.XXXXXX)
topic="dlqrate_$$_$RANDOM"
java -cp "$jars/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" --create \
  --topic "$topic" --partitions 1 --config max.message.bytes=2048 >/dev/null 2>&1
python3 - "$dir/in.jsonl" "$records" "$every" "$who" <<'PY'
import random, sys
path, n, every, who = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for i in range(1, n + 1):
        v = "v" * 20
        if i % every == 0:
            v = "".join(random.choice("0123456789abcdef") for _ in range(2500)) if who != "sluice" else "v" * 2500
        f.write('{"operation":"create","metadata":{"table":"t"},"key":{"id":%d},'
                '"payload":{"after":{"id":%d,"v":"%s"}}}\n' % (i, i, v))
PY
txn=""
[ "$who" != sluice ] && txn="        compression: lz4
        batch.size: 1500B
"
[ "$who" = broker ] && txn="$txn        compression.size_check: false
"
[ "$mode" = transactions ] && txn="$txn        transactions: true
        positions.topic: ${topic}_positions"
cat >"$dir/p.yaml" <<YAML
version: 1
pipelines:
  - id: dlqrate
    source: {connector: file, settings: {path: in.jsonl}}
    destination:
      connector: kafka
      settings:
        brokers: "$brokers"
        topic: "$topic"
$txn
    on_error: dlq
    dlq: {connector: file, settings: {path: dead.jsonl}}
checkpoints: {path: cp.db}
http: {enabled: false}
YAML
start=$(date +%s.%N)
(cd "$dir" && timeout 600 "$root/build/sluice" run p.yaml --idle-exit 1 >run.log 2>&1) || echo "run failed: $(tail -3 "$dir/run.log")"
end=$(date +%s.%N)
dead=$(wc -l <"$dir/dead.jsonl" 2>/dev/null || echo 0)
python3 -c "import sys; s=$end-$start; print(f'$mode: {$records} records, {$dead} to the DLQ in {s:.2f} s: {$dead/s:.0f} rejects/s')"
grep -o "[0-9,]* read, [0-9,]* written[^;]*" "$dir/run.log" | tail -1
java -cp "$jars/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" --delete \
  --topic "$topic" >/dev/null 2>&1 || true
[ -n "${KEEP:-}" ] && echo "kept $dir" || rm -rf "$dir"
