#!/usr/bin/env python3
"""The web console in a real headless browser (Debian's chromium driven by Playwright).

Runs `sluice run` with two pipelines and a bearer token: `gen` (generator → SQLite, endless at a
few hundred rows/s) and `dl` (a followed JSON-lines file → SQLite whose CHECK rejects v = 'bad',
dead letters in a file). Then, through the page only:
  - the token form (the API answers 401 without it);
  - both pipelines listed, `gen` running with a live throughput chart;
  - `gen` paused from the page: the source stops (the destination's row count stays), and the
    numbers the page shows equal /metrics' (sluice_records_read_total, sluice_records_written_total);
  - resumed from the page: rows flow again;
  - `dl`'s dead-letter queue listed with its reasons, one entry replayed after the table is fixed
    (the row lands), one discarded;
  - the resolved configuration shown with the token nowhere in the page.
Screenshots go to --artifacts. Exit 0 on success, 1 with the failures listed.

Usage: console_test.py --sluice BUILD/sluice --artifacts DIR [--chromium /usr/bin/chromium]
"""
import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "console-test-token-3f9a"

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def wait_until(fn, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= deadline:
            return v
        time.sleep(step)


def http_get(port, path, token=TOKEN):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, name, pipeline):
    """The value of a series `name` whose labels include pipeline="ID" (summed over the rest)."""
    _, text = http_get(port, "/metrics")
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") and f'pipeline="{pipeline}"' in line:
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def rows(db, table):
    try:
        c = sqlite3.connect(db, timeout=10)
        try:
            return c.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error:
        return -1


def dlq_line(i, v):
    return json.dumps({"operation": "create", "metadata": {"table": "items"}, "key": {"id": i},
                       "payload": {"after": {"id": i, "v": v}}}) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--chromium", default=os.environ.get("SLUICE_CHROMIUM", "/usr/bin/chromium"))
    args = ap.parse_args()
    args.sluice = os.path.abspath(args.sluice)
    os.makedirs(args.artifacts, exist_ok=True)
    if not os.access(args.chromium, os.X_OK):
        print(f"no chromium at {args.chromium}: run scripts/bootstrap (Debian package chromium)",
              file=sys.stderr)
        return 1
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("no Playwright for Python: run scripts/bootstrap (it makes the console venv)",
              file=sys.stderr)
        return 1

    work = tempfile.mkdtemp(prefix="sluice-console-")
    items = os.path.join(work, "items.db")
    c = sqlite3.connect(items)
    c.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT CHECK (v <> 'bad'))")
    c.commit()
    c.close()
    with open(os.path.join(work, "in.jsonl"), "w") as f:
        for i in range(1, 11):
            f.write(dlq_line(i, "bad" if i in (4, 7) else "ok"))
    with open(os.path.join(work, "p.yaml"), "w") as f:
        f.write(f"""version: 1
pipelines:
  - id: gen
    source:
      connector: generator
      settings: {{count: 0, rate: 300}}
    destination:
      connector: sqlite
      settings: {{path: gen.db, table: employees}}
    batch: {{max_records: 50, linger_ms: 20}}
  - id: dl
    source:
      connector: file
      settings: {{path: in.jsonl, follow: true}}
    destination:
      connector: sqlite
      settings: {{path: items.db}}
    on_error: dlq
    dlq:
      connector: file
      settings: {{path: dead.jsonl}}
checkpoints: {{path: cp.db}}
http: {{listen: "127.0.0.1:0", token: {TOKEN}}}
""")
    stderr_path = os.path.join(work, "stderr.txt")
    err = open(stderr_path, "w")
    proc = subprocess.Popen([args.sluice, "run", "p.yaml"], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=err, stdin=subprocess.DEVNULL)

    def log():
        with open(stderr_path) as f:
            return f.read()

    port = 0
    try:
        m = wait_until(lambda: re.search(r"127\.0\.0\.1:(\d+)/metrics", log()), 30)
        if not check(m is not None, "sluice never said where it listens:\n" + log()):
            return 1
        port = int(m.group(1))
        gen_db = os.path.join(work, "gen.db")
        check(wait_until(lambda: rows(gen_db, "employees") > 100, 30), "gen wrote nothing")

        # The static files are served without the token; the API is not.
        check(http_get(port, "/", token=None)[0] == 200, "/ needs a token")
        check(http_get(port, "/api/v1/pipelines", token=None)[0] == 401, "the API answered without a token")

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            console_errors = []
            # The browser reports each 401 before the token was given (some after it, late).
            page.on("console", lambda msg: msg.type == "error" and "401 (Unauthorized)" not in msg.text
                    and console_errors.append(msg.text))
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.on("dialog", lambda d: d.accept())
            page.goto(f"http://127.0.0.1:{port}/?interval=300")

            # Token form, then the list.
            page.wait_for_selector("#login:not([hidden])", timeout=15000)
            page.screenshot(path=os.path.join(args.artifacts, "01-token.png"))
            page.fill("#token", TOKEN)
            page.click("#login-form button")
            page.wait_for_selector('tr[data-pipeline="gen"]', timeout=15000)
            check(page.is_hidden("#login"), "the token form is still shown after the token was given")
            page.wait_for_selector('tr[data-pipeline="dl"]', timeout=15000)
            gen_row = 'tr[data-pipeline="gen"]'
            check(page.text_content(f"{gen_row} .state") == "running", "gen is not shown running")

            # The detail of gen: a throughput chart drawn from live samples.
            page.click(f"{gen_row} td.id")
            page.wait_for_selector('#detail[data-pipeline="gen"]', timeout=15000)
            check(wait_until(lambda: page.locator("#chart-rate polyline").count() == 1, 15),
                  "no throughput chart")
            check(wait_until(lambda: float(page.get_attribute(f"{gen_row} td.rate", "data-value") or 0) > 0, 15),
                  "the page shows no throughput for gen")
            page.screenshot(path=os.path.join(args.artifacts, "02-running.png"), full_page=True)
            config = page.text_content("#d-config") or ""
            check('"generator"' in config, "the resolved configuration is not shown: " + config[:300])
            check(TOKEN not in page.content(), "the token appears in the page")

            # Pause from the page: nothing more is written; the page's numbers equal /metrics'.
            page.click(f"{gen_row} button.pause")
            check(wait_until(lambda: page.text_content(f"{gen_row} .state") == "paused", 15),
                  "gen never shown paused")
            time.sleep(1.0)
            before = rows(gen_db, "employees")
            time.sleep(1.5)
            check(rows(gen_db, "employees") == before, "rows were written while gen was paused")
            for series, cell in (("sluice_records_written_total", "written"),
                                 ("sluice_records_read_total", "read")):
                shown, expected = None, None

                def same():
                    nonlocal shown, expected
                    shown = page.get_attribute(f"{gen_row} td.{cell}", "data-value")
                    expected = metric(port, series, "gen")
                    return shown is not None and expected is not None and float(shown) == expected

                check(wait_until(same, 10), f"the page shows {cell} {shown}, /metrics {series} {expected}")
            written = float(page.get_attribute(f"{gen_row} td.written", "data-value"))
            check(written == rows(gen_db, "employees") or written >= rows(gen_db, "employees"),
                  "the page's written count is below the destination's rows")
            page.screenshot(path=os.path.join(args.artifacts, "03-paused.png"), full_page=True)

            # Resume from the page: rows flow again.
            page.click(f"{gen_row} button.resume")
            check(wait_until(lambda: page.text_content(f"{gen_row} .state") == "running", 15),
                  "gen never shown running again")
            check(wait_until(lambda: rows(gen_db, "employees") > before + 50, 20),
                  "no rows after resume")

            # The dead-letter queue of dl: two entries with their reasons.
            dl_row = 'tr[data-pipeline="dl"]'
            page.click(f"{dl_row} td.id")
            page.wait_for_selector('#detail[data-pipeline="dl"]', timeout=15000)
            check(wait_until(lambda: page.locator("tr.dlq-entry").count() == 2, 20),
                  "the page does not list dl's two dead letters")
            reasons = page.locator("tr.dlq-entry td.reason").all_text_contents()
            check(all("CHECK" in r for r in reasons) and len(reasons) == 2, f"reasons: {reasons}")
            check(page.get_attribute(f"{dl_row} td.dead", "data-value") == "2",
                  "dead letters count not shown as 2")
            page.screenshot(path=os.path.join(args.artifacts, "04-dlq.png"), full_page=True)

            # Fix the table, replay entry 1 (id 7), discard entry 0 (id 4), from the page.
            c = sqlite3.connect(items, timeout=10)
            c.executescript("BEGIN; ALTER TABLE items RENAME TO items_old; "
                            "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT); "
                            "INSERT INTO items SELECT * FROM items_old; DROP TABLE items_old; COMMIT;")
            c.close()
            page.click('tr.dlq-entry[data-index="1"] button.replay')
            check(wait_until(lambda: page.locator("tr.dlq-entry").count() == 1, 20),
                  "the replayed entry is still listed")
            check("replayed 1" in (page.text_content("#notice") or ""),
                  "no replay outcome shown: " + (page.text_content("#notice") or ""))
            page.click('tr.dlq-entry[data-index="0"] button.discard')
            check(wait_until(lambda: page.locator("tr.dlq-entry").count() == 0, 20),
                  "the discarded entry is still listed")
            c = sqlite3.connect(items, timeout=10)
            check(c.execute("SELECT count(*) FROM items WHERE id = 7 AND v = 'bad'").fetchone()[0] == 1,
                  "the replayed record is not in the destination")
            check(c.execute("SELECT count(*) FROM items WHERE id = 4").fetchone()[0] == 0,
                  "the discarded record reached the destination")
            c.close()
            page.screenshot(path=os.path.join(args.artifacts, "05-dlq-done.png"), full_page=True)
            check(not console_errors, f"the page logged errors: {console_errors}")
            browser.close()

        # Every call the page made that changed something is in the log.
        text = log()
        for what in ("POST /api/v1/pipelines/gen/pause", "POST /api/v1/pipelines/gen/resume",
                     "POST /api/v1/pipelines/dl/dlq/1/replay", "DELETE /api/v1/pipelines/dl/dlq/0"):
            check(what in text, f"not logged: {what}")
        check(TOKEN not in text, "the token is in the log")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
            check(rc == 0, f"sluice exited {rc}:\n{log()[-3000:]}")
        except subprocess.TimeoutExpired:
            proc.kill()
            check(False, "sluice did not stop within 60 s of SIGTERM")
        err.close()

    if FAILURES:
        print(f"{len(FAILURES)} failure(s); the log:\n{log()[-4000:]}", file=sys.stderr)
        return 1
    print(f"console test passed; screenshots in {args.artifacts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
