"""What sign-in costs a shared dashboard: the time of one, what it does to the other pages, and what it tells.

    .venv/bin/python benchmarks/bench_sign_in.py [--logins 3] [--rounds 5]

Starts the real app (`app.py`) with accounts hashed as `users add` hashes
them (PBKDF2-SHA256, 600,000 rounds) and prints:

1. one sign-in of a known name and of an unknown one, median of `--rounds`,
   interleaved, and their ratio: near 1 means the answer's time does not tell
   which names exist;
2. `--logins` sign-ins sent at once (other names, the right password) while a
   signed-in page asks the change route (`/workbench/changes`) every 20 ms:
   how long the sign-ins took, and the page's slowest and median answer.
   Checking passwords on the server's event loop held every page until all
   were checked; in a thread pool the page answers as it does alone.

The page's answer alone is printed first, for comparison. Run it on a quiet
machine: other jobs on the cores change every figure here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from browser_fixtures import start_app  # noqa: E402

from workbench.access import users  # noqa: E402

PASSWORD = "a-long-password"


def sign_in_seconds(url: str, name: str) -> tuple[float, int]:
    start = time.perf_counter()
    answer = httpx.post(url + "login", data={"username": name, "password": PASSWORD}, timeout=60)
    return time.perf_counter() - start, answer.status_code


def page_waits(page: httpx.Client, until) -> list[float]:
    """The change route's answer times, asked every 20 ms until `until()` is true."""
    waits = []
    while not until():
        asked = time.perf_counter()
        page.get("workbench/changes", params={"run": "x"})
        waits.append(time.perf_counter() - asked)
        time.sleep(0.02)
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logins", type=int, default=3, help="sign-ins sent at once (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="sign-ins of each kind for the timing (default 5)")
    args = parser.parse_args()

    names = ["page", "known"] + [f"student{i}" for i in range(args.logins)]
    with tempfile.TemporaryDirectory() as folder:
        users_file = Path(folder) / "users.txt"
        users_file.write_text("".join(users.add_user_line(name, PASSWORD) + "\n" for name in names))
        server = start_app(Path(folder) / "runs", extra_env={users.USERS_FILE_ENV: str(users_file)})
        try:
            print(f"app served in {server.seconds_to_serve:.1f} s; PBKDF2-SHA256, {users.ITERATIONS:,} rounds")
            known, unknown = [], []
            for i in range(args.rounds):
                known.append(sign_in_seconds(server.url, "known")[0])
                unknown.append(sign_in_seconds(server.url, f"nobody{i}")[0])
            k, u = statistics.median(known), statistics.median(unknown)
            print(
                f"1. sign-in, median of {args.rounds}: known name {k:.3f} s, unknown name {u:.3f} s "
                f"(unknown / known {u / k:.2f})"
            )

            with httpx.Client(base_url=server.url, timeout=60) as page:
                assert page.post("login", data={"username": "page", "password": PASSWORD}).status_code == 200
                alone_end = time.perf_counter() + 1.0
                alone = page_waits(page, lambda: time.perf_counter() > alone_end)
                results = []
                threads = [
                    threading.Thread(target=lambda n=name: results.append(sign_in_seconds(server.url, n)))
                    for name in names[2:]
                ]
                start = time.perf_counter()
                for thread in threads:
                    thread.start()
                during = page_waits(page, lambda: not any(t.is_alive() for t in threads))
                span = time.perf_counter() - start
            print(
                f"2. the change route alone: median {statistics.median(alone) * 1000:.0f} ms, "
                f"slowest {max(alone) * 1000:.0f} ms ({len(alone)} asks)"
            )
            statuses = sorted({status for _, status in results})
            print(
                f"   {args.logins} sign-ins at once took {span:.3f} s (each {min(r[0] for r in results):.3f} to "
                f"{max(r[0] for r in results):.3f} s, answers {statuses}); meanwhile the change route: "
                f"median {statistics.median(during) * 1000:.0f} ms, slowest {max(during) * 1000:.0f} ms "
                f"({len(during)} asks)"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
