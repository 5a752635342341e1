"""The traffic a run offers, judged against the definitions rather than the code: key shares against
Zipf's law within binomial error, due counts against a numerical integral of the rate the flag
describes, the producer's old pacing kept exactly, and every bad flag text refused in one line."""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgmq_sim.errors import UsageError
from pgmq_sim.model.profile_flag import MAX_PROFILE_BYTES, parse_rate_profile
from pgmq_sim.model.profiles import IDLE_WAIT_S, Burst, ConstantRate, Ramp, RateProfile, Replay, Steps
from pgmq_sim.model.skew import KeySkew, UniformKeys, ZipfKeys, key_sampler, zipf_share

pytestmark = pytest.mark.unit

SIGMAS = 5  # a correct sampler lands outside 5 binomial standard errors about once in 1.7 million


def one_line_error(call: Callable[[], object]) -> str:
    with pytest.raises(UsageError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and message.strip() == message and ";" in message, message
    return message


# --- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "s", "shown"),
    [
        ("uniform", "uniform", 0.0, "uniform"),
        (" uniform ", "uniform", 0.0, "uniform"),
        ("zipf:1.2", "zipf", 1.2, "zipf:1.2"),
        ("zipf:1", "zipf", 1.0, "zipf:1"),
        ("zipf:0.05", "zipf", 0.05, "zipf:0.05"),
        ("zipf:1.0000001", "zipf", 1.0000001, "zipf:1.0000001"),
    ],
)
def test_key_skew_reads_the_flag_and_gives_its_text_back(text: str, kind: str, s: float, shown: str) -> None:
    skew = KeySkew.parse(text)
    assert (skew.kind, skew.s) == (kind, s)
    assert str(skew) == shown
    assert KeySkew.parse(str(skew)) == skew


@pytest.mark.parametrize(
    "text",
    ["", "zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:x", "zipf:nan", "zipf:inf", "zipf:1e999", "Zipf:1.2",
     "zipf 1.2", "zipf:1.2:3", "normal", "uniform:1", "zipf:\n1",
     "zipf:1_0", "zipf:+1", "zipf: 1"],
)  # fmt: skip
def test_key_skew_refuses_what_is_not_a_skew_naming_text_and_fix(text: str) -> None:
    message = one_line_error(lambda: KeySkew.parse(text))
    assert message.startswith("-key-skew '") and "zipf:S with S > 0" in message
    if text.isprintable():
        assert f"'{text}'" in message


def test_uniform_keys_are_exactly_the_producers_randint_one_call_per_draw() -> None:
    keys, mine, reference = 1234, random.Random(42), random.Random(42)
    sampler = key_sampler(KeySkew("uniform"), keys)
    assert sampler == UniformKeys(keys)
    assert [sampler.draw(mine) for _ in range(5000)] == [reference.randint(1, keys) for _ in range(5000)]
    assert mine.getstate() == reference.getstate()  # no extra rng call anywhere


def test_key_sampler_gives_zipf_for_a_zipf_skew() -> None:
    assert key_sampler(KeySkew.parse("zipf:1.2"), 99) == ZipfKeys(99, 1.2)


@functools.cache
def draws(sampler: ZipfKeys, count: int, seed: int) -> tuple[int, ...]:
    """Kept for the session: the chi-square test reads the same draws as the share test."""
    rng = random.Random(seed)
    return tuple(sampler.draw(rng) for _ in range(count))


@pytest.mark.parametrize(
    ("keys", "s", "count"),
    [(1000, 1.2, 200_000), (1000, 1.0, 200_000), (2, 1.5, 200_000), (5_000_000, 1.1, 200_000),
     (50, 0.5, 50_000), (2**31 - 1, 1.0000001, 50_000)],
)  # fmt: skip
def test_zipf_hottest_key_takes_its_share_within_binomial_error(keys: int, s: float, count: int) -> None:
    seen = draws(ZipfKeys(keys, s), count, seed=keys % 1009)
    expected = zipf_share(keys, s)
    tolerance = SIGMAS * math.sqrt(expected * (1 - expected) / count)
    assert abs(seen.count(1) / count - expected) <= tolerance
    assert min(seen) >= 1 and max(seen) <= keys


def chi_square_survival_even_df(statistic: float, df: int) -> float:
    """P(chi-square with df degrees of freedom > statistic), in closed form for an even df."""
    half = statistic / 2
    return math.exp(-half) * math.fsum(half**i / math.factorial(i) for i in range(df // 2))


def test_chi_square_survival_is_right_where_tables_give_it() -> None:
    assert chi_square_survival_even_df(18.307, 10) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_survival_even_df(2.0, 2) == pytest.approx(math.exp(-1))


def test_zipf_first_ten_ranks_pass_a_chi_square_test() -> None:
    keys, s, count = 1000, 1.0, 200_000
    seen = Counter(draws(ZipfKeys(keys, s), count, seed=keys % 1009))
    cells = [(seen[rank], count * zipf_share(keys, s, rank)) for rank in range(1, 11)]
    rest = count - sum(observed for observed, _ in cells)
    cells.append((rest, count - sum(expected for _, expected in cells)))  # ranks 11..K as one cell
    statistic = sum((observed - expected) ** 2 / expected for observed, expected in cells)
    assert chi_square_survival_even_df(statistic, len(cells) - 1) > 1e-4, statistic


def test_zipf_keeps_keys_in_range_at_the_edges_of_its_parameters() -> None:
    assert set(draws(ZipfKeys(1, 1.0), 1000, seed=1)) == {1}
    assert set(draws(ZipfKeys(2**31 - 1, 60.0), 1000, seed=1)) == {1}  # k**-60: key 2 is 1e-18 likely
    near_flat = draws(ZipfKeys(3, 1e-9), 30_000, seed=1)
    assert set(near_flat) == {1, 2, 3} and min(Counter(near_flat).values()) > 9000
    for s in (0.2, 1.0, 1 - 1e-12, 1 + 1e-12, 3.0):
        seen = draws(ZipfKeys(2**31 - 1, s), 2000, seed=3)
        assert min(seen) >= 1 and max(seen) <= 2**31 - 1


class OnlyRandom(random.Random):
    """An rng that counts random() calls and refuses every other way of drawing."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls = 0

    def random(self) -> float:
        self.calls += 1
        return super().random()

    def getrandbits(self, k: int) -> int:
        raise AssertionError("ZipfKeys must draw through rng.random() only")


def test_zipf_draws_replay_from_the_seed_through_rng_random_alone() -> None:
    sampler, counted = ZipfKeys(10_000, 1.3), OnlyRandom(5)
    seen = [sampler.draw(counted) for _ in range(3000)]
    assert tuple(seen) == draws(ZipfKeys(10_000, 1.3), 3000, seed=5)
    assert tuple(seen) != draws(sampler, 3000, seed=6)
    assert 3000 <= counted.calls < 3000 * 1.5  # O(1) each: rejections are rare


@pytest.mark.parametrize("s", [0.8, 1.0, 1.2])
def test_zipf_share_matches_the_exact_sum_for_a_million_keys(s: float) -> None:
    keys = 10**6
    exact = math.fsum(map(pow, range(1, keys + 1), [-s] * keys))
    assert zipf_share(keys, s) == pytest.approx(1 / exact, rel=1e-12)
    assert zipf_share(keys, s, rank=1000) == pytest.approx(1000**-s / exact, rel=1e-12)


def test_zipf_share_small_cases_add_up_and_are_continuous_at_one() -> None:
    assert zipf_share(2, 1.5) == pytest.approx(1 / (1 + 2**-1.5), rel=1e-15)
    assert zipf_share(4, 0.0, rank=3) == pytest.approx(0.25)
    assert math.fsum(zipf_share(300, 1.1, rank) for rank in range(1, 301)) == pytest.approx(1, rel=1e-12)
    assert zipf_share(5_000_000, 1 + 1e-10) == pytest.approx(zipf_share(5_000_000, 1.0), rel=1e-8)
    with pytest.raises(ValueError):
        zipf_share(10, 1.0, rank=11)


# --- rates: the definitions, written again here from the spec -----------------------------------


@dataclass(frozen=True)
class Case:
    """A profile, its rate as the spec defines it, when it ends, and how far to look."""

    name: str
    profile: RateProfile
    spec_rate: Callable[[float], float]
    end_s: float | None
    horizon_s: float


def ramp_rate(start: float, end: float, over_s: float) -> Callable[[float], float]:
    return lambda t: start + (end - start) * min(t, over_s) / over_s


def steps_rate(rates: tuple[float, ...], each_s: float) -> Callable[[float], float]:
    return lambda t: rates[min(int(t // each_s), len(rates) - 1)]


def burst_rate(base: float, rate: float, burst_s: float, every_s: float) -> Callable[[float], float]:
    return lambda t: base + (rate if t % every_s < burst_s else 0.0)


def replay_rate(points: tuple[tuple[float, float], ...], speed: float) -> Callable[[float], float]:
    def rate(t: float) -> float:
        recorded = t * speed
        if recorded >= points[-1][0] + 1:
            return 0.0
        return ([0.0] + [r for second, r in points if second <= recorded])[-1]

    return rate


RECORDING = ((0.0, 10.0), (3.0, 50.0), (7.0, 0.0), (8.0, 20.0))
CASES = [
    Case("constant", ConstantRate(250.0), lambda t: 250.0, None, 30.0),
    Case("ramp up", Ramp(100, 1000, 60), ramp_rate(100, 1000, 60), None, 75.0),
    Case("ramp from 0", Ramp(0, 500, 10), ramp_rate(0, 500, 10), None, 15.0),
    Case("ramp down to 0", Ramp(1000, 0, 20), ramp_rate(1000, 0, 20), 20.0, 25.0),
    Case("ramp down", Ramp(900, 300, 7.5), ramp_rate(900, 300, 7.5), None, 12.0),
    Case("steps", Steps((100, 200, 400), 10), steps_rate((100, 200, 400), 10), None, 40.0),
    Case("steps through 0", Steps((0, 300, 0), 5), steps_rate((0, 300, 0), 5), 10.0, 20.0),
    Case("burst over a base", Burst(100, 500, 2, 10), burst_rate(100, 500, 2, 10), None, 45.0),
    Case("burst alone", Burst(0, 500, 2, 10), burst_rate(0, 500, 2, 10), None, 45.0),
    Case("replay", Replay(RECORDING, 2.0), replay_rate(RECORDING, 2.0), 4.5, 8.0),
    Case("replay late", Replay(((2.0, 40.0), (4.0, 80.0)), 4.0), replay_rate(((2.0, 40.0), (4.0, 80.0)), 4.0),
         1.25, 3.0),
]  # fmt: skip
STEP_S = 0.01  # every breakpoint above is a multiple: the midpoint rule is exact between them


def numerical_integral(rate: Callable[[float], float], until_s: float) -> Callable[[float], float]:
    """The integral of rate from 0, by the midpoint rule on a STEP_S grid."""
    running = [0.0]
    for k in range(int(until_s / STEP_S) + 2):
        running.append(running[-1] + rate((k + 0.5) * STEP_S) * STEP_S)

    def integral(t: float) -> float:
        k = int(t / STEP_S)
        return running[k] + rate((k * STEP_S + t) / 2) * (t - k * STEP_S)

    return integral


def sample_times(case: Case, count: int = 300) -> list[float]:
    rng = random.Random(case.name)
    fixed = [0.0, 0.004, 0.5, 1.0, 1.999, 2.0, 5.0, 9.99, 10.0, 13.37, 30.0, 59.99, 60.0, 4.5, 4.49]
    spread = {rng.uniform(0, case.horizon_s) for _ in range(count)}
    return sorted({t for t in fixed if t <= case.horizon_s} | spread)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_due_is_the_floor_of_the_integral_of_the_rate_the_spec_describes(case: Case) -> None:
    integral = numerical_integral(case.spec_rate, case.horizon_s)
    first = 1 if case.spec_rate(0.0) > 0 else 0
    assert case.profile.due(0.0) == first and case.profile.due(-1.0) == 0
    assert case.profile.end_s == case.end_s
    for t in sample_times(case):
        expected = math.floor(integral(t)) + first
        if case.end_s is not None:
            expected = min(expected, math.floor(integral(case.end_s)))
        assert abs(case.profile.due(t) - expected) <= 1, t


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_rate_at_is_the_rate_the_spec_describes(case: Case) -> None:
    for t in sample_times(case, count=100):
        ended = case.end_s is not None and t >= case.end_s
        assert case.profile.rate_at(t) == pytest.approx(0.0 if ended else case.spec_rate(t), abs=1e-9), t
    assert case.profile.rate_at(-0.5) == 0.0


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (Burst(100, 500, 2, 10), {0: 600, 1.999: 600, 2: 100, 9.999: 100, 10: 600, 11.99: 600, 12: 100,
                                  1000: 600, 1002: 100}),
        (Burst(0, 500, 2, 10), {0: 500, 1.5: 500, 2: 0, 20: 500, 22: 0}),
        (Steps((100, 200, 400), 10), {0: 100, 9.999: 100, 10: 200, 19.99: 200, 20: 400, 1e6: 400}),
        (Ramp(100, 1000, 60), {0: 100, 30: 550, 60: 1000, 120: 1000}),
        (Replay(RECORDING, 2.0), {0: 10, 1.49: 10, 1.5: 50, 3.49: 50, 3.5: 0, 4: 20, 4.49: 20, 4.5: 0, 9: 0}),
    ],
)  # fmt: skip
def test_rate_at_the_boundaries_of_bursts_steps_and_rows(
    profile: RateProfile, expected: dict[float, float]
) -> None:
    assert {t: profile.rate_at(t) for t in expected} == pytest.approx(expected)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_due_time_is_when_next_due_in_has_each_message_due(case: Case) -> None:
    """The producer dates a look's arrivals by due_time (one question each) where the rate at its
    last look was not 0: the same due times as next_due_in from that look, and due(t) counts each."""
    profile = case.profile
    times = sample_times(case)
    for last, at in itertools.pairwise(times):
        if profile.rate_at(last) == 0:
            continue
        for count in range(profile.due(last), min(profile.due(at), profile.due(last) + 50)):
            when = profile.due_time(count)
            assert when is not None and profile.due(when) > count, (last, count)
            assert min(at, max(last, when)) == pytest.approx(
                min(at, last + profile.next_due_in(last, count)), abs=1e-9
            ), (last, count)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_next_due_in_wakes_the_producer_just_when_the_next_message_is_due(case: Case) -> None:
    profile = case.profile
    final = profile.due(case.end_s) if case.end_s is not None else None
    for t in sample_times(case):
        count = profile.due(t)
        wait = profile.next_due_in(t, count)
        if count:
            assert profile.next_due_in(t, count - 1) == 0.0
        if profile.rate_at(t) == 0:
            assert 0 < wait <= IDLE_WAIT_S, t
        elif final is None or count < final:
            assert wait > 0 and profile.due(t + wait) >= count + 1, t
            assert profile.due(t + wait - 0.001) <= count, t  # not more than 1 ms late
        else:
            assert 0 < wait <= IDLE_WAIT_S, t  # the profile has nothing more to offer


def ulps_around(edge: float, count: int = 3) -> list[float]:
    below, above = [edge], [edge]
    for _ in range(count):
        below.append(math.nextafter(below[-1], -math.inf))
        above.append(math.nextafter(above[-1], math.inf))
    return below + above[1:]


EDGES = (0.3, 0.7, 0.9, 1.4, 1.7, 1.8, 2.0, 4.5, 10.0, 20.0, 60.0, 90.0)


@pytest.mark.parametrize(
    ("profile", "edges"),
    [(case.profile, EDGES) for case in CASES]
    + [
        (Steps((3.3, 0.1), 0.7), EDGES),
        (Burst(3.1, 0.1, 0.7, 0.7), EDGES),
        # where a naive period count times the per-period total steps back at a period's start
        (Burst(19, 25, 3.51, 4.8), tuple(k * 4.8 for k in range(1, 200))),
        (Burst(35, 26, 1.18, 1.2), tuple(k * 1.2 for k in range(1, 200))),
        # where the rising formula, used for a falling rate, steps back in the last bits
        (Ramp(21, 9.58, 100), (100.0,)),
        (Ramp(84, 29, 14), (14.0,)),
    ],
)
def test_due_never_decreases_even_across_boundaries_at_the_last_bit(
    profile: RateProfile, edges: tuple[float, ...]
) -> None:
    times = [k * 0.0173 for k in range(5000)] + [t for edge in edges for t in ulps_around(edge)]
    counts = [profile.due(t) for t in sorted(times)]
    assert all(a <= b for a, b in itertools.pairwise(counts))


@pytest.mark.parametrize("rate", [0.3, 1.0, 7.0, 100.0, 333.3, 12345.6])
def test_constant_rate_keeps_the_producers_pacing_exactly(rate: float) -> None:
    profile = ConstantRate(rate)
    rng = random.Random(rate)
    times = [k / 64 for k in range(500)] + [rng.uniform(0, 1000) for _ in range(500)]
    times += [(i - 1) / rate for i in range(1, 200)]  # exactly when each message is due
    for t in times:
        assert profile.due(t) == int(t * rate) + 1, t
        generated = profile.due(t)
        assert profile.next_due_in(t, generated) == pytest.approx(generated / rate - t, abs=1e-9)
    assert profile.end_s is None


def test_an_ended_profile_offers_the_floor_of_its_integral_and_then_nothing() -> None:
    replay = Replay(RECORDING, 2.0)  # 10/s for 1.5 s, 50/s for 2 s, 0 for 0.5 s, 20/s for 0.5 s
    assert replay.due(4.5) == replay.due(1e9) == 15 + 100 + 10
    assert replay.due(math.nextafter(4.5, 0)) == 125  # message 125 is due at 4.45 s
    assert Ramp(1000, 0, 20).due(1e6) == 10_000
    assert Steps((0, 300, 0), 5).due(100) == 1500
    assert Replay(((0.0, 0.5),), 1.0).due(10) == 0  # half a message is no message
    ramp = Ramp(0, 500, 10)  # 25 t**2 offered by t: from rate 0, message 1 is due when 1 is, at 0.2 s
    assert (ramp.due(0.0), ramp.due(0.199), ramp.due(0.201)) == (0, 0, 1)


def test_describe_says_what_the_flag_asked_for() -> None:
    assert Ramp(100, 1000, 60).describe() == "ramp 100..1000/s over 60 s"
    assert Steps((100, 200, 400), 10).describe() == "steps 100, 200, 400/s, 10 s each"
    assert Burst(100, 500, 2, 10).describe() == "burst +500/s for 2 s every 10 s over 100/s"
    assert Burst(0, 500, 2.5, 10).describe() == "burst +500/s for 2.5 s every 10 s"
    assert ConstantRate(250).describe() == "constant 250/s"
    assert Replay(RECORDING, 2.0).describe() == "replay of 4 rows (9 s recorded) at 2x: 4.5 s"


# --- the -rate-profile flag ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ramp:100..1000/60s", Ramp(100, 1000, 60)),
        (" ramp:100..1000/60 ", Ramp(100, 1000, 60)),
        ("ramp:0.5..2.5/1.5s", Ramp(0.5, 2.5, 1.5)),
        ("ramp:1000..0/20s", Ramp(1000, 0, 20)),
        ("step:100,200,400/10s", Steps((100, 200, 400), 10)),
        ("step:5/1", Steps((5,), 1)),
        ("burst:500*2s/10s", Burst(100, 500, 2, 10)),
        ("burst:500*2/10", Burst(100, 500, 2, 10)),
        ("burst:1e3*0.5s/0.5s", Burst(100, 1000, 0.5, 0.5)),
    ],
)
def test_rate_profile_forms_parse(text: str, expected: RateProfile) -> None:
    assert parse_rate_profile(text, base_rate=100.0, speed=1.0) == expected


def test_speed_is_only_for_the_csv_form() -> None:
    assert parse_rate_profile("step:5/1", base_rate=0.0, speed=0.0) == Steps((5,), 1)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "ramp", "ramp:", "ramp:100..1000", "ramp:100-1000/60s", "ramp:-1..100/60s",
     "ramp:100..1000/0s", "ramp:0..0/10s", "ramp:1e999..1/1s", "ramp:100..1000/60ss", "step:/10s",
     "step:100,,200/10s", "step:0,0/10s", "step:100,200/0s", "step:100;200/10s", "burst:500*2s",
     "burst:0*2s/10s", "burst:500*0s/10s", "burst:500*12s/10s", "burst:500*2s/0s", "burst:-5*2s/10s",
     "step:1\n/10s"],
)  # fmt: skip
def test_rate_profile_refuses_every_bad_form_in_one_line(text: str) -> None:
    message = one_line_error(lambda: parse_rate_profile(text, base_rate=100.0, speed=1.0))
    assert "-rate-profile" in message and "e.g." in message
    if text.strip() and text.isprintable():
        assert text.strip() in message


@pytest.mark.parametrize("base", [-1.0, math.nan, math.inf])
def test_a_burst_needs_a_base_rate_that_is_a_rate(base: float) -> None:
    message = one_line_error(lambda: parse_rate_profile("burst:500*2s/10s", base_rate=base, speed=1.0))
    assert message.startswith("-rate ")


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    "content",
    [
        "second,rate\n0,10\n3s,50\n7,0\n8,20\n",
        "0,10\r\n\r\n3,50\r\n7s,0\r\n8,20",
        "\ufefft (s), msg/s\n0 , 10\n3,50\n\n7,0\n8,20\n",
    ],
)
def test_a_csv_recording_round_trips_into_a_replay(tmp_path: Path, content: str) -> None:
    path = write(tmp_path / "day.csv", content)
    profile = parse_rate_profile(str(path), base_rate=999.0, speed=2.0)
    assert profile == Replay(RECORDING, 2.0)
    assert profile.end_s == 4.5 and profile.due(10) == 125


def test_a_day_at_speed_1440_lasts_a_minute_with_its_rates_kept(tmp_path: Path) -> None:
    rows = "".join(f"{minute * 60},{100 + minute % 7}\n" for minute in range(1440))
    profile = parse_rate_profile(str(write(tmp_path / "day.csv", rows)), base_rate=0.0, speed=1440.0)
    assert profile.end_s == pytest.approx((1439 * 60 + 1) / 1440)
    assert profile.rate_at(30.0) == 100 + 720 % 7  # recorded minute 720 (second 43200) at wall 30 s


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("0,10\n5,20\n5,30\n", "line 3"),
        ("0,10\n5,20\n4,30\n", "line 3"),
        ("second,rate\n-1,5\n", "line 2"),
        ("second,rate\n0,10\n2,abc\n", "line 3"),
        ("0,10\n1,-5\n", "line 2"),
        ("0,10\n1,nan\n", "line 2"),
        ("0,10\n1,inf\n", "line 2"),
        ("0,10\ninf,3\n", "line 2"),
        ("0,10,3\n", "line 1"),
        ("0,10\n1;10\n", "line 2"),
        ("0,10\n\nsecond,rate\n", "line 3"),
        (b"0,10\n1,\xff\n", "line 2"),
        ("", "no second,rate rows"),
        ("second,rate\n", "no second,rate rows"),
        ("0,0\n1,0\n", "never offers a message"),
    ],
)
def test_a_bad_csv_is_refused_naming_the_file_and_the_first_bad_line(
    tmp_path: Path, content: str | bytes, where: str
) -> None:
    path = write(tmp_path / "shape.csv", content)
    message = one_line_error(lambda: parse_rate_profile(str(path), base_rate=0.0, speed=1.0))
    assert str(path) in message and where in message and "second,rate" in message


def test_csv_files_past_10_mb_and_unreadable_paths_are_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as handle:
        handle.write(b"0,10\n")
        handle.truncate(MAX_PROFILE_BYTES + 1)
    assert "larger than 10 MB" in one_line_error(lambda: parse_rate_profile(str(huge), 0.0, 1.0))
    assert "cannot read" in one_line_error(lambda: parse_rate_profile(str(tmp_path), 0.0, 1.0))
    missing = str(tmp_path / "missing.csv")
    assert "neither a form nor an existing CSV file" in one_line_error(
        lambda: parse_rate_profile(missing, 0.0, 1.0)
    )


@pytest.mark.parametrize("speed", [0.0, -1.0, math.nan, math.inf])
def test_a_replay_speed_must_be_a_finite_positive_number(tmp_path: Path, speed: float) -> None:
    path = write(tmp_path / "shape.csv", "0,10\n")
    assert "speed" in one_line_error(lambda: parse_rate_profile(str(path), base_rate=0.0, speed=speed))
