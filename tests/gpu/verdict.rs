//! CPU tests of the GPU tests' verdicts: the code that turns counts and
//! bytes read back from a GPU into pass or fail, run on made-up inputs. They
//! need no GPU, so they run everywhere (CI included) as ordinary tests of
//! this harness (`verdict::…`), where the GPU tests are listed as ignored.
//! Without them a change that stopped a must-trip control from failing, or a
//! check that stopped looking at the guard bytes, would stay green on every
//! machine without a GPU.
//!
//! Covered: the litmus tests' `judge`/`check_ran` and the message-passing
//! verdict (`litmus::mp_verdict`); the collective matrix's `check` and its
//! cross-member comparison (`collective::compare_members`); the framed
//! destinations of the stream-ordered collectives (`stream::check_framed`)
//! and the guarded results of the `_grid` forms (`collective::grid_check`).

use crate::collective::{self, TeamSpec, View};
use crate::common::TestResult;
use crate::litmus::{self, Ctl, Expect, Tally};
use crate::stream;

/// A test: its name and its body.
type CpuTest = (&'static str, fn() -> TestResult);

/// Every verdict test, named without the `verdict::` prefix.
pub fn tests() -> Vec<CpuTest> {
    vec![
        ("litmus_must_trip_control_without_violations_fails", must_trip_without_violations_fails),
        ("litmus_tripped_control_passes", tripped_control_passes),
        ("litmus_not_yet_shown_control_never_fails", not_yet_shown_never_fails),
        ("litmus_smoke_run_asserts_no_control", smoke_run_asserts_no_control),
        ("litmus_control_that_did_not_run_fails", control_that_did_not_run_fails),
        ("litmus_must_trip_declarations", must_trip_declarations),
        ("litmus_ordered_run_verdict", ordered_run_verdict),
        ("collective_check_right_result_passes", collective_right_result_passes),
        ("collective_check_catches_unwritten_and_wrong", collective_catches_unwritten_and_wrong),
        ("collective_check_catches_guard_writes", collective_catches_guard_writes),
        ("collective_check_catches_non_member_writes", collective_catches_non_member_writes),
        ("collective_members_must_agree", collective_members_must_agree),
        ("stream_framed_check", stream_framed_check),
        ("collective_grid_guards", grid_guards),
    ]
}

/// Fails with `msg` unless `cond`.
fn ensure(cond: bool, msg: impl FnOnce() -> String) -> TestResult {
    if cond {
        Ok(())
    } else {
        Err(msg().into())
    }
}

/// A tally in which every one of 64 tasks ran, with `violations`.
fn ran(violations: u64) -> Tally {
    Tally { violations, observed: 1000, sent: 2000, ran: 64, tasks: 64, timeouts: 0, runs: 3, secs: 1.0 }
}

/// The failures `judge` reports for `ctl` on tally `t` (`smoke`: a smoke run's reason).
fn judged(ctl: Ctl, t: &Tally, smoke: Option<&str>) -> Vec<String> {
    let mut failures = Vec::new();
    let line = litmus::judge_in(litmus::control(ctl), t, "messages", smoke, &mut failures);
    // The printed line says the same as the verdict.
    let failed = line.starts_with("FAILED CONTROL");
    assert_eq!(failed, failures.iter().any(|f| f.contains("is MustTrip")), "{line} / {failures:?}");
    failures
}

fn must_trip() -> impl Iterator<Item = &'static litmus::Control> {
    litmus::CONTROLS.iter().filter(|c| c.expect == Expect::MustTrip)
}

/// Every `MustTrip` control that ran fully but showed no violation fails its test.
fn must_trip_without_violations_fails() -> TestResult {
    for c in must_trip() {
        let f = judged(c.ctl, &ran(0), None);
        ensure(f.len() == 1 && f[0].contains("is MustTrip"), || {
            format!("{:?}: MustTrip, 0 violations: want one MustTrip failure, got {f:?}", c.ctl)
        })?;
    }
    Ok(())
}

/// A control that tripped (MustTrip or not) and ran fully is no failure.
fn tripped_control_passes() -> TestResult {
    for c in litmus::CONTROLS {
        for v in [1, 817] {
            let f = judged(c.ctl, &ran(v), None);
            ensure(f.is_empty(), || format!("{:?} with {v} violations: want no failure, got {f:?}", c.ctl))?;
        }
    }
    Ok(())
}

/// A `NotYetShown` control is reported, never asserted: no failure with or without violations.
fn not_yet_shown_never_fails() -> TestResult {
    let report_only: Vec<_> = litmus::CONTROLS.iter().filter(|c| c.expect == Expect::NotYetShown).collect();
    ensure(!report_only.is_empty(), || "no NotYetShown control declared".into())?;
    for c in report_only {
        let f = judged(c.ctl, &ran(0), None);
        ensure(f.is_empty(), || format!("{:?} (NotYetShown), 0 violations: want no failure, got {f:?}", c.ctl))?;
    }
    Ok(())
}

/// In a smoke run (processes, quick mode) no control is asserted, but it must still have run.
fn smoke_run_asserts_no_control() -> TestResult {
    for c in litmus::CONTROLS {
        let f = judged(c.ctl, &ran(0), Some("quick mode"));
        ensure(f.is_empty(), || format!("{:?}, smoke run, 0 violations: want no failure, got {f:?}", c.ctl))?;
        let mut short = ran(0);
        short.ran = 63;
        let f = judged(c.ctl, &short, Some("quick mode"));
        ensure(f.len() == 1, || format!("{:?}, smoke run, a task missing: want one failure, got {f:?}", c.ctl))?;
    }
    Ok(())
}

/// A control that did not run fully fails, even when it tripped: no tasks,
/// a task that did not report, a wait that timed out.
fn control_that_did_not_run_fails() -> TestResult {
    let none = Tally { tasks: 0, ran: 0, ..ran(5) };
    let short = Tally { ran: 63, ..ran(5) };
    let timed_out = Tally { timeouts: 1, ..ran(5) };
    let over = Tally { ran: 65, ..ran(5) };
    for c in litmus::CONTROLS {
        for (what, t) in
            [("no tasks", &none), ("a task short", &short), ("a timeout", &timed_out), ("ran > tasks", &over)]
        {
            let f = judged(c.ctl, t, None);
            ensure(f.iter().any(|m| m.contains("tasks reported")), || {
                format!("{:?}, {what}: want a did-not-run failure, got {f:?}", c.ctl)
            })?;
        }
    }
    // The same check on an ordered run.
    let mut f = Vec::new();
    litmus::check_ran("ordered", &Tally { tasks: 0, ran: 0, ..ran(0) }, &mut f);
    ensure(f.len() == 1, || format!("check_ran on an empty tally: want one failure, got {f:?}"))
}

/// The controls that tripped in every GPU run so far stay `MustTrip`:
/// declaring one `NotYetShown` (which makes its test pass without it) has to
/// change this list too, on purpose.
fn must_trip_declarations() -> TestResult {
    let want = [
        Ctl::MpFence,
        Ctl::MpQuiet,
        Ctl::MpSignal,
        Ctl::MpSignalOp,
        Ctl::AmoFlag,
        Ctl::AmoData,
        Ctl::FencePuts,
        Ctl::SbNothing,
        Ctl::GetNoBarrier,
        Ctl::CrossNothing,
    ];
    let got: Vec<Ctl> = must_trip().map(|c| c.ctl).collect();
    ensure(got == want, || format!("MustTrip controls {got:?}, want {want:?}"))
}

/// The ordered runs of a message-passing test: any violation, a missing or
/// silent task or (PEs running together) readers that observed too little fail.
fn ordered_run_verdict() -> TestResult {
    let verdict = |t: &Tally, want_tasks: u64, sliced: bool| {
        let mut f = Vec::new();
        litmus::mp_verdict("MP", t, want_tasks, sliced, &mut f);
        f
    };
    let good = Tally { observed: 1500, ..ran(0) };
    ensure(verdict(&good, 64, false).is_empty(), || format!("a clean run failed: {:?}", verdict(&good, 64, false)))?;
    let cases = [
        ("one violation", Tally { violations: 1, ..good }, 64, false),
        ("a task not placed", good, 65, false),
        ("a task silent", Tally { ran: 63, ..good }, 64, false),
        ("a wait timed out", Tally { timeouts: 2, ..good }, 64, false),
        ("too few observed", Tally { observed: 400, ..good }, 64, false),
    ];
    for (what, t, want_tasks, sliced) in cases {
        let f = verdict(&t, want_tasks, sliced);
        ensure(!f.is_empty(), || format!("ordered run with {what}: want a failure, got none"))?;
    }
    // Time-sliced PEs may observe few messages, but no violation.
    let few = Tally { observed: 1, ..good };
    ensure(verdict(&few, 64, true).is_empty(), || "time-sliced, few observed: want no failure".into())?;
    ensure(!verdict(&Tally { violations: 1, ..few }, 64, true).is_empty(), || "time-sliced violation passed".into())
}

/// A copy batch on 2 PEs (world and the one-member team {1}) as PE `me`
/// sees it, prepared: (batch, names, prepared, views).
fn copies(me: usize) -> (collective::Batch, Vec<String>, collective::Prepared) {
    let specs = [TeamSpec::World, TeamSpec::Strided(1, 1, 1)];
    let b = collective::copy_batch(2, &specs, &[1, 33]);
    let views = [
        View { handle: 0, my: Some(me), members: vec![0, 1] },
        View { handle: 1, my: (me == 1).then_some(0), members: vec![1] },
    ];
    let names = specs.iter().map(|s| s.name()).collect();
    let p = collective::prepare(&b, &views, me, 0x10_0000, 0x20_0000);
    (b, names, p)
}

/// The result exactly as expected: no failure, a digest per broadcast/fcollect case.
fn collective_right_result_passes() -> TestResult {
    for me in 0..2 {
        let (b, names, p) = copies(me);
        let (bad, digests) = collective::check(&b, 0, &names, me, &p, &p.want);
        ensure(bad.is_empty(), || format!("PE {me}: the expected bytes failed: {bad:?}"))?;
        let members = b.cases.iter().enumerate().filter(|(i, c)| p.written[*i].is_some() && c.kind != 2).count();
        ensure(digests.len() == members, || format!("PE {me}: {} digests, want {members}", digests.len()))?;
    }
    Ok(())
}

/// A destination left as poisoned (nothing written) fails every case this
/// PE is a member of (bar empty ones); one wrong byte fails its case.
fn collective_catches_unwritten_and_wrong() -> TestResult {
    let (b, names, p) = copies(0);
    let (bad, _) = collective::check(&b, 0, &names, 0, &p, &p.init);
    let written = p.written.iter().filter(|w| w.is_some_and(|(_, len)| len > 0)).count();
    ensure(written > 0 && bad.len() == written, || {
        format!("nothing written: {} failures, want {written}: {bad:?}", bad.len())
    })?;
    for (i, c) in b.cases.iter().enumerate() {
        let Some((_, len)) = p.written[i].filter(|w| w.1 > 0) else { continue };
        let mut got = p.want.clone();
        got[c.dst_at + len - 1] ^= 1;
        let (bad, _) = collective::check(&b, 0, &names, 0, &p, &got);
        ensure(bad.len() == 1 && bad[0].contains(&format!("case {i}:")) && bad[0].contains("element"), || {
            format!("case {i}, last result byte flipped: want one element failure, got {bad:?}")
        })?;
    }
    Ok(())
}

/// A byte written just before or just after a case's result fails as a guard byte.
fn collective_catches_guard_writes() -> TestResult {
    let (b, names, p) = copies(1);
    for (i, c) in b.cases.iter().enumerate() {
        let Some((_, len)) = p.written[i] else { continue };
        for at in [c.dst_at - 1, c.dst_at - c.dst_lead, c.dst_at + len, c.dst_at + c.dst_cap] {
            let mut got = p.want.clone();
            got[at] ^= 0x40;
            let (bad, _) = collective::check(&b, 0, &names, 1, &p, &got);
            ensure(bad.len() == 1 && bad[0].contains("guard byte"), || {
                format!(
                    "case {i}: byte {at} (result at {}, {len} B) changed: want a guard failure, got {bad:?}",
                    c.dst_at
                )
            })?;
        }
    }
    Ok(())
}

/// A non-member's destination must stay untouched.
fn collective_catches_non_member_writes() -> TestResult {
    let (b, names, p) = copies(0);
    let outside: Vec<usize> = (0..b.cases.len()).filter(|&i| p.written[i].is_none()).collect();
    ensure(!outside.is_empty(), || "PE 0 is a member of every case: no non-member case to check".into())?;
    for i in outside {
        let mut got = p.want.clone();
        got[b.cases[i].dst_at] ^= 0xFF;
        let (bad, _) = collective::check(&b, 0, &names, 0, &p, &got);
        ensure(bad.len() == 1 && bad[0].contains("non-member"), || {
            format!("case {i}: non-member's destination written: want one failure, got {bad:?}")
        })?;
    }
    Ok(())
}

/// Members of one team instance whose results differ fail, even when each
/// matched its own expectation (digests).
fn collective_members_must_agree() -> TestResult {
    let (b, names, _) = copies(0);
    let batches = [b];
    let same = vec![vec![(0, 0, 0, 7), (0, 1, 0, 9)], vec![(0, 0, 0, 7), (0, 1, 0, 9)]];
    let (n, bad) = collective::compare_members(&batches, &names, &same);
    ensure(n == 2 && bad.is_empty(), || format!("agreeing members: {n} instances, failures {bad:?}"))?;
    let differ = vec![vec![(0, 0, 0, 7), (0, 1, 0, 9)], vec![(0, 0, 0, 7), (0, 1, 0, 8)]];
    let (_, bad) = collective::compare_members(&batches, &names, &differ);
    ensure(bad.len() == 1 && bad[0].contains("case 1"), || format!("members differing in case 1: got {bad:?}"))
}

/// The stream collectives' framed destinations: the result, the bytes after
/// it and the guard before it are all checked.
fn stream_framed_check() -> TestResult {
    let want: Vec<u8> = (0..40u8).collect();
    let front = stream::front_guard(stream::FRAME);
    let len = 40 + stream::FRAME;
    let right = [want.clone(), stream::tail_guard(stream::FRAME)].concat();
    ensure(stream::check_framed("x", &front, &right, &want, 4).is_none(), || "the right result failed".into())?;
    let poisoned = stream::poisoned(&want, len);
    ensure(poisoned.len() == len && poisoned[..40].iter().zip(&want).all(|(p, w)| p != w), || {
        "the poison does not differ from the result in every byte".into()
    })?;
    let must_fail = |what: &str, front: &[u8], got: &[u8], needle: &str| -> TestResult {
        match stream::check_framed("x", front, got, &want, 4) {
            Some(m) if m.contains(needle) => Ok(()),
            other => Err(format!("{what}: want a failure naming {needle:?}, got {other:?}").into()),
        }
    };
    must_fail("nothing written", &front, &poisoned, "element 0 of 10")?;
    let mut last = right.clone();
    last[39] ^= 1;
    must_fail("last element wrong", &front, &last, "element 9 of 10")?;
    let mut over = right.clone();
    over[40] = 0;
    must_fail("one byte past the end", &front, &over, "0 bytes past the result's end")?;
    let mut far = right.clone();
    far[len - 1] ^= 0x80;
    must_fail("the last guard byte", &front, &far, "past the result's end")?;
    let mut before = front.clone();
    before[stream::FRAME - 1] = 0;
    must_fail("the byte before", &before, &right, "1 bytes before it")?;
    // A non-member (no result): every byte of its destination is guard.
    let untouched = stream::tail_guard(len);
    ensure(stream::check_framed("x", &front, &untouched, &[], 4).is_none(), || {
        "an untouched non-member failed".into()
    })?;
    let mut touched = untouched;
    touched[0] ^= 1;
    ensure(stream::check_framed("x", &front, &touched, &[], 4).is_some(), || "a touched non-member passed".into())
}

/// The `_grid` forms' six results with guards between them: a result that
/// runs one word past its end, or one left unwritten, is named.
fn grid_guards() -> TestResult {
    let lens = collective::grid_result_lens(10, 2, 4);
    let want: Vec<u32> = (0..lens.iter().sum::<usize>() as u32).map(|i| i * 3 + 1).collect();
    let (before, after) = collective::grid_frames(&lens, &want);
    ensure(collective::grid_check(&lens, &after, &after).is_empty(), || "the right buffer failed".into())?;
    let bad = collective::grid_check(&lens, &before, &after);
    ensure(bad.len() == 6, || format!("nothing written: want 6 failures (one per result), got {bad:?}"))?;
    // The broadcast (10 words, after the first guard) writes one word too many.
    let mut over = after.clone();
    over[collective::GRID_GAP + 10] = 7;
    let bad = collective::grid_check(&lens, &over, &after);
    ensure(bad.len() == 1 && bad[0].starts_with("the guard after broadcast: word 0"), || {
        format!("broadcast one word long: want the guard after it named, got {bad:?}")
    })?;
    // The last result overruns into the final guard.
    let mut last = after.clone();
    let end = last.len() - collective::GRID_GAP;
    last[end] ^= 1;
    let bad = collective::grid_check(&lens, &last, &after);
    ensure(bad.len() == 1 && bad[0].starts_with("the guard after reducescatter"), || {
        format!("reducescatter one word long: got {bad:?}")
    })?;
    // A write before the first result.
    let mut first = after.clone();
    first[collective::GRID_GAP - 1] ^= 1;
    let bad = collective::grid_check(&lens, &first, &after);
    ensure(bad.len() == 1 && bad[0].starts_with("the guard before the results"), || format!("got {bad:?}"))
}
