# binlog -> discard at N rows: sluice (bench/mysql's run_sluice, timed to the last write, 10 ms polls)
# against build/sluice_mysql_binlog_ceiling (process start to last event), alternated, 3 each.
# Run from the repository's root with SLUICE_TEST_MYSQL_URL set:
#   python3 benchmarks/2026-12-07-binlog-rate-snapshot-batches/binlog_n.py 1000000 5000000
import importlib.machinery, importlib.util, os, sys, json, subprocess, time, statistics, tempfile
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
for rows in [int(a) for a in sys.argv[1:]]:
    db = f"rx_n{rows}"
    myb.mysql(c, f"DROP DATABASE IF EXISTS `{db}`; CREATE DATABASE `{db}`")
    myb.mysql(c, myb.TABLE_DDL, db)
    f, start, end, gtid = myb.load(c, db, rows)
    url = dst.mysql_db_url(base, db)
    cs, ss = [], []
    for i in range(3):
        t0 = time.monotonic()
        r = subprocess.run(["./build/sluice_mysql_binlog_ceiling", c["host"], str(c["port"]), c["user"], c["password"] or "", f, str(start), str(end)], capture_output=True, text=True)
        cs.append(time.monotonic() - t0)
        wd = tempfile.mkdtemp(prefix="bn")
        myb.seed_checkpoint(wd, "bn", f"cdc {f} {start} {gtid or '-'}")
        q = json.dumps
        y = (f"version: 1\npipelines:\n  - id: bn\n    source: {{connector: mysql, settings: {{url: {q(url)}, tables: [employees], server_id: {6000 + i + rows % 997}}}}}\n"
             f"    destination: {{connector: discard}}\ncheckpoints: {{path: cp.db}}\nhttp: {{listen: \"127.0.0.1:0\"}}\n")
        run = myb.pgb.run_sluice(wd, y, rows, 1, f"bn-{rows}-{i}", log_dir="bn-logs")
        assert run["ok"] and run["written"] == rows, run["err"][-500:]
        ss.append(run["seconds"])
    cm, sm = statistics.median(cs), statistics.median(ss)
    print(f"{rows:>9,} rows: ceiling {['%.3f' % x for x in cs]} median {cm:.3f} s; sluice {['%.3f' % x for x in ss]} median {sm:.3f} s; ratio {cm / sm:.0%}; sluice {rows / sm / 1e6:.2f} M rows/s", flush=True)
    myb.mysql(c, f"DROP DATABASE IF EXISTS `{db}`")
