# binlog -> discard, A/B: N rows loaded once, then ROUNDS rounds over the same events, each round the
# raw reader (build/sluice_mysql_binlog_ceiling, process start to last event) and then each given
# sluice binary in turn (bench/mysql's run_sluice: process start until sluice_records_written_total
# reaches N, polled every 10 ms). Run from the repository's root with SLUICE_TEST_MYSQL_URL set:
#   ROUNDS=11 python3 benchmarks/2026-12-07-binlog-source-thread/ab.py 5000000 /tmp/sluice-a /tmp/sluice-b
import importlib.machinery, importlib.util, os, sys, json, time, statistics, subprocess, tempfile
def _load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    m = importlib.util.module_from_spec(spec); loader.exec_module(m); return m
os.environ.setdefault("BENCH_OUT", "bench-out")
myb = _load("bench_mysql", "./bench/mysql")
dst = _load("bench_destinations", "./bench/destinations")
myb.pgb.POLL_S = 0.01
base = os.environ["SLUICE_TEST_MYSQL_URL"]
c = myb.parse_mysql_url(base)
rows, bins = int(sys.argv[1]), sys.argv[2:]
rounds = int(os.environ.get("ROUNDS", "5"))
db = "rx_ab"
myb.mysql(c, f"DROP DATABASE IF EXISTS `{db}`; CREATE DATABASE `{db}`")
myb.mysql(c, myb.TABLE_DDL, db)
f, start, end, gtid = myb.load(c, db, rows)
time.sleep(20)  # InnoDB flushes what the load dirtied: let it finish before timing
url = dst.mysql_db_url(base, db)
res = {"ceiling": []} | {b: [] for b in bins}
for i in range(rounds):
    t0 = time.monotonic()
    subprocess.run(["./build/sluice_mysql_binlog_ceiling", c["host"], str(c["port"]), c["user"],
                    c["password"] or "", f, str(start), str(end)], capture_output=True, text=True, check=True)
    res["ceiling"].append(time.monotonic() - t0)
    for k, b in enumerate(bins):
        myb.pgb.SLUICE = b
        wd = tempfile.mkdtemp(prefix="ab")
        myb.seed_checkpoint(wd, "ab", f"cdc {f} {start} {gtid or '-'}")
        q = json.dumps
        y = (f"version: 1\npipelines:\n  - id: ab\n    source: {{connector: mysql, settings: {{url: {q(url)}, tables: [employees], server_id: {6100 + i * 10 + k}}}}}\n"
             f"    destination: {{connector: discard}}\ncheckpoints: {{path: cp.db}}\nhttp: {{listen: \"127.0.0.1:0\"}}\n")
        run = myb.pgb.run_sluice(wd, y, rows, 1, f"ab-{i}-{k}", log_dir="ab-logs")
        assert run["ok"] and run["written"] == rows, run["err"][-500:]
        res[b].append(run["seconds"])
cm = statistics.median(res["ceiling"])
print(f"{rows:,} rows, {rounds} rounds; raw reader median {cm:.3f} s {[round(x, 3) for x in res['ceiling']]}")
for b in bins:
    m = statistics.median(res[b])
    print(f"  {b}: median {m:.3f} s, {rows / m / 1e6:.2f} M rows/s, {cm / m:.0%} of the raw reader {[round(x, 3) for x in res[b]]}")
myb.mysql(c, f"DROP DATABASE IF EXISTS `{db}`")
