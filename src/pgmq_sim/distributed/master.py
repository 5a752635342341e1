"""Workers in other processes, on this host or others, over Locust's runners: the carrier of a
distributed run. The run itself (check, prepare, watch, halt, collect), the audit, table health and
the report stay on the master, once; the producer too, unless a -rate or -rate-profile spreads its sessions
over the worker processes (distributed/producing).

Worker processes report their counters every REPORT_S and their HDR histograms every few reports;
the master takes them (histograms merge exactly) and places each report's completions on its own
timeline. A process that dies (its exit, or Locust's heartbeat marking it missing) leaves its last
commits unreported: the master asks the server (`remaining`) to know the run is done, and the
journal, per worker name, for that process's true totals.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from locust import events
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_STOPPED, MasterRunner

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.distributed import messages as m
from pgmq_sim.distributed.dealing import deal_workers
from pgmq_sim.distributed.members import Member, Members
from pgmq_sim.distributed.monitor import Monitor
from pgmq_sim.distributed.producing import MasterDraws, wall_start
from pgmq_sim.distributed.runner_flags import DistributedOptions
from pgmq_sim.distributed.web import show_queue
from pgmq_sim.engine.bounded import TICK_S
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import SimError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.result.claims import ClaimBook

JOIN_WAIT_LOCAL_S = 60.0  # worker processes this master started: they start in about a second
JOIN_WAIT_REMOTE_S = 600.0  # --master: someone has to start the workers on the other hosts
READY_WAIT_S = 60.0
FINAL_WAIT_S = 8.0
CHILD_EXIT_S = 5.0


class LocustCarrier:
    """The master's side: listens, starts its own worker processes (--processes) or waits for others
    (--master), deals the workers, relays faults, takes reports, notices lost processes."""

    counts_from_journal = True  # a lost process's last completions (Members.reconcile)

    def __init__(self, options: DistributedOptions) -> None:
        self.options = options
        self.children: list[subprocess.Popen[bytes]] = []
        self.environment: Environment | None = None
        self.master: MasterRunner | None = None
        self._members: Members | None = None

    @property
    def members(self) -> Members:
        assert self._members is not None, "the master is not open"
        return self._members

    def connections(self, state: RunState) -> int:
        """Each worker process opens its own listener (-wakeup notify) and heartbeat (-tx split)."""
        settings = state.settings
        per_process = (settings.wakeup == WakeupMode.NOTIFY) + (settings.tx == TxMode.SPLIT)
        return settings.workers + self.options.expect_workers * per_process

    # -- before the run: listen, start the local processes (they join while the queue fills) --------

    def open(self, state: RunState) -> None:
        state.runners = ["-"] * len(state.stats)
        options = self.options
        self.environment = Environment(user_classes=[], events=events)
        try:
            self.master = self.environment.create_master_runner(options.bind_host, options.bind_port)
        except SystemExit:  # Locust exits when the port is taken
            raise SimError(
                f"cannot listen on {options.bind_host}:{options.bind_port} for workers: the port is busy;"
                " pass --master-bind-port P"
            ) from None
        master = self.master
        self._members = Members(state, master, self.children)
        if options.processes is None:
            line = f"master listening on {options.bind_host}:{master.server.port}; waiting for"
            line += f" {options.expect_workers} worker(s)"
            state.observer.say(line)
            state.log.event(line)
        if options.web:
            sys.argv[1:] = []  # the web UI parses Locust's flags from sys.argv; ours are parsed already
            web_ui = self.environment.create_web_ui(host="", port=options.web_port)
            show_queue(web_ui, state)
            state.observer.say(f"web UI on http://{socket.gethostname()}:{options.web_port}/")
        self._start_children(state)

    def _start_children(self, state: RunState) -> None:
        if self.options.processes is None:
            return
        assert self.master is not None
        port = str(self.master.server.port)
        command = [sys.executable, "-m", "pgmq_sim", "--worker", "--master-host", "127.0.0.1"]
        out = None if state.settings.logfile == "-" else subprocess.DEVNULL
        for k in range(1, self.options.processes + 1):
            env = dict(os.environ, **{m.PROCESS_ENV: str(k)})
            self.children.append(
                subprocess.Popen(
                    [*command, "--master-port", port], env=env, stdout=out, stdin=subprocess.DEVNULL
                )
            )

    # -- start: the plans, then go ---------------------------------------------------------------

    def ready(self, state: RunState) -> None:
        members = self._await_members(state)
        assert self.master is not None
        deal_workers(state, self.master, members, self.options.web)
        if any(member.producing is not None for member in members):
            assert state.source is not None
            self.members.draws = MasterDraws(state.source)
            state.spread_producers = lambda _: self._produce(state)
        self._wait(
            state,
            lambda: all(member.ready for member in members),
            READY_WAIT_S,
            "the worker processes did not all get ready",
        )

    def _produce(self, state: RunState) -> None:
        """The producing processes start at the run clock's zero, sent as wall-clock time."""
        assert self.master is not None
        self.master.send_message(m.PRODUCE, {"at": wall_start(state)})

    def connected(self, state: RunState) -> None:
        pass  # each worker process connected its workers before it said it was ready

    def go(self, state: RunState) -> list[RunThread]:
        self.members.last_count_change = time.monotonic()
        assert self.master is not None
        self.master.send_message(m.START, {})
        if self.options.web:
            self.master.update_state(STATE_RUNNING)
        return [Monitor(self.members, state)]

    def describe(self, state: RunState) -> str:
        return f"{state.settings.workers} workers in {len(self.members)} processes"

    def allow(self, state: RunState, count: int) -> None:
        """Every worker process applies it to its own workers (by their place in the run)."""
        assert self.master is not None
        self.master.send_message(m.ALLOW, {"count": count})

    def busy(self, state: RunState) -> int:
        return sum(member.busy for member in self.members if not member.lost)

    def wakeups(self, state: RunState) -> int | None:
        return None  # each worker process listens for itself and does not report it

    def claim_books(self, state: RunState) -> list[ClaimBook] | None:
        return None  # each worker process counts its own claims and does not report them

    def crash(self, state: RunState, names: list[str]) -> None:
        """The processes that run these workers make them die mid-work."""
        assert self.master is not None
        for member in self.members:
            mine = [n for n in names if n in member.names]
            if mine:
                self.master.send_message(m.CRASH, {"names": mine}, client_id=member.client_id)

    def _wait(self, state: RunState, until: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not until():
            if state.signals.interrupt.is_set():
                raise InterruptedError(what)
            if self.members.failure is not None:
                raise SimError(self.members.failure[0])
            dead = [c for c in self.children if c.poll() is not None]
            if dead and not state.started:
                raise SimError(f"a worker process exited ({dead[0].returncode}) before the run started")
            if time.monotonic() > deadline:
                raise SimError(f"{what} within {seconds:g} s")
            time.sleep(TICK_S)

    def _await_members(self, state: RunState) -> list[Member]:
        want = self.options.expect_workers
        self._wait(
            state,
            lambda: len(self.members) >= want,
            JOIN_WAIT_LOCAL_S if self.children else JOIN_WAIT_REMOTE_S,
            f"fewer than {want} worker process(es) joined",
        )
        return self.members.joined()

    # -- the end ----------------------------------------------------------------------------------

    def stop(self, state: RunState) -> None:
        """Ask every worker process to stop and wait for its final report; count the lost ones."""
        if self.master is None or not state.started:
            return
        members = self.members
        self.master.send_message(m.STOP, {})
        deadline = time.monotonic() + FINAL_WAIT_S
        while time.monotonic() < deadline and not all(
            member.final or member.lost or members.gone(member) for member in members
        ):
            time.sleep(0.05)
        for member in members:
            if not member.final and member.lost is None:
                member.lost = "no final report"
        if state.changed and not state.signals.hurry.is_set():
            members.reconcile()
            if state.spread_producers is not None:
                self._owed(state)

    def _owed(self, state: RunState) -> None:
        """A spread run's arrivals its end cut off, for db.settle: each process's own ids in flight or
        waiting at its end, and those it never drew; a lost process's, from the lowest it owed."""
        producing = [member for member in self.members if member.producing is not None]
        self.members.count_produced()
        by_share = {member.producing.share: member for member in producing if member.producing}
        reports = {member.producing.share: member.enqueues or {} for member in producing if member.producing}
        owed = {share: set(report.get("owed") or ()) for share, report in reports.items()}
        drawn = max((int(report.get("drawn", 0)) for report in reports.values()), default=0)

        def owes(share: int, msg_id: int) -> bool:
            report = reports[share]
            if by_share[share].lost or report.get("owed") is None:  # no final word: from its mark
                return msg_id >= int(report.get("mark", 1))
            return msg_id in owed[share] or msg_id > int(report.get("drawn", 0))

        assert self.members.draws is not None
        state.cut_off = self.members.draws.owed(len(by_share), owes, drawn)
        for member in producing:
            if member.lost:
                state.enqueues_stopped = True
                mark = int((member.enqueues or {}).get("mark", 1))
                state.note(
                    f"worker process {member.runner} lost: its producer sessions' enqueues stopped (its"
                    f" groups' arrivals from msg_id {mark} on are written after the run if below one"
                    " that landed, left pending)"
                )

    def close(self, state: RunState) -> None:
        master = self.master
        if master is None:
            return
        if self.options.web:
            master.update_state(STATE_STOPPED)
        try:
            master.quit()
        except Exception as exc:  # a worker gone with its socket: nothing left to tell it
            state.note(f"quitting the workers: {exc}", screen=False)
        deadline = time.monotonic() + CHILD_EXIT_S
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=CHILD_EXIT_S)
        web_ui = self.environment.web_ui if self.environment is not None else None
        if web_ui is not None and web_ui.server is not None:
            web_ui.stop()
