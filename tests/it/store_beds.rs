//! The bed-slot contract, one test body run against both backends: SQLite (the
//! embedded default) and PostgreSQL. Slot numbers and ports are unique among live beds
//! (a bed is live while a claim holds its task with its worktree), a worktree made
//! again keeps its number, and reservers racing on connections of their own never
//! share a slot or a port.

use crate::common;
use common::backend::{both, Fleet};
use spice::clock::SystemClock;
use spice::store::{Authority, BedSlot, ClaimRequest, Holder, SlotRequest};
use std::sync::{Arc, Barrier};
use std::time::Duration;

both!(slots_and_ports_are_unique_among_live_beds);
both!(a_worktree_made_again_keeps_its_slot_number);
both!(a_clash_drops_the_worktrees_earlier_row);
both!(racing_reservers_never_share_a_slot_or_a_port);
both!(only_the_claim_s_holder_now_reserves_its_slot);

/// A new task claimed by `claimant` working in `worktree`: its id and holder.
fn claim(s: &mut dyn Authority, claimant: &str, worktree: &str) -> (String, Holder) {
    let t = s
        .add_task(
            spice::task::NewTask {
                title: claimant.into(),
                ..Default::default()
            },
            &[],
        )
        .unwrap();
    let req = ClaimRequest {
        claimant: claimant.to_string(),
        lane: None,
        worktree: Some(worktree.to_string()),
        lease: Duration::from_secs(600),
    };
    let c = s.claim(&t.id, &req).unwrap();
    (t.id, Holder::fenced(claimant.to_string(), c.fence))
}

fn req<'a>(wt: &'a str, task: &'a str, ports: &'a [u16]) -> SlotRequest<'a> {
    SlotRequest {
        worktree: wt,
        task_id: task,
        template: None,
        method: Some("cold"),
        ports,
        fence: None,
    }
}

fn slots_and_ports_are_unique_among_live_beds(f: &Fleet) {
    let mut s = f.authority();
    let (a, _) = claim(&mut *s, "a", "/w/a");
    let (b, hb) = claim(&mut *s, "b", "/w/b");
    let sa = s
        .reserve_bed_slot(&req("/w/a", &a, &[4000, 4001]))
        .unwrap()
        .unwrap();
    assert_eq!(sa.slot, 0);
    assert_eq!(
        (sa.ports.as_slice(), sa.method.as_deref()),
        (&[4000, 4001][..], Some("cold"))
    );
    let clash = s.reserve_bed_slot(&req("/w/b", &b, &[4001, 4002])).unwrap();
    assert_eq!(clash, Err(vec![4001]));
    let sb = s.reserve_bed_slot(&req("/w/b", &b, &[4002, 4003])).unwrap();
    assert_eq!(sb.clone().unwrap().slot, 1);
    assert_eq!(s.bed_slots().unwrap().len(), 2);
    assert_eq!(s.bed_slot("/w/b").unwrap(), Some(sb.unwrap()));
    // Released: its slot and ports are free for the next bed; its row is still there
    // until then.
    s.release(&b, &hb).unwrap();
    assert_eq!(s.bed_slots().unwrap().len(), 1);
    assert!(s.bed_slot("/w/b").unwrap().is_some());
    let (c, _) = claim(&mut *s, "c", "/w/c");
    let sc = s.reserve_bed_slot(&req("/w/c", &c, &[4002])).unwrap();
    assert_eq!(sc.unwrap().slot, 1);
    assert_eq!(
        s.bed_slot("/w/b").unwrap(),
        None,
        "dropped by that reservation"
    );
}

fn a_worktree_made_again_keeps_its_slot_number(f: &Fleet) {
    let mut s = f.authority();
    let (a, ha) = claim(&mut *s, "a", "/w/a");
    let (b, _) = claim(&mut *s, "b", "/w/b");
    s.reserve_bed_slot(&req("/w/a", &a, &[4000]))
        .unwrap()
        .unwrap();
    let sb = s
        .reserve_bed_slot(&req("/w/b", &b, &[4001]))
        .unwrap()
        .unwrap();
    assert_eq!(sb.slot, 1);
    // Slot 0 comes free; b's worktree is made again: it keeps 1.
    s.release(&a, &ha).unwrap();
    let again = s
        .reserve_bed_slot(&req("/w/b", &b, &[4001]))
        .unwrap()
        .unwrap();
    assert_eq!(again.slot, 1);
    assert_eq!(s.bed_slots().unwrap().len(), 1);
}

fn a_clash_drops_the_worktrees_earlier_row(f: &Fleet) {
    let mut s = f.authority();
    let (a, _) = claim(&mut *s, "a", "/w/a");
    let (b, _) = claim(&mut *s, "b", "/w/b");
    s.reserve_bed_slot(&req("/w/a", &a, &[4000]))
        .unwrap()
        .unwrap();
    s.reserve_bed_slot(&req("/w/b", &b, &[4001]))
        .unwrap()
        .unwrap();
    let clash = s.reserve_bed_slot(&req("/w/b", &b, &[4000])).unwrap();
    assert_eq!(clash, Err(vec![4000]));
    assert_eq!(s.bed_slot("/w/b").unwrap(), None);
    assert_eq!(s.bed_slots().unwrap().len(), 1);
}

fn racing_reservers_never_share_a_slot_or_a_port(f: &Fleet) {
    const N: usize = 6;
    let tasks: Vec<String> = {
        let mut s = f.authority();
        (0..N)
            .map(|i| claim(&mut *s, &format!("r{i}"), &format!("/w/{i}")).0)
            .collect()
    };
    let loc = f.location();
    // Each reserver offers a port of its own and one they all want.
    let race = |shared: Option<u16>| -> Vec<Result<BedSlot, Vec<u16>>> {
        let start = Arc::new(Barrier::new(N));
        let handles: Vec<_> = tasks
            .iter()
            .enumerate()
            .map(|(i, task)| {
                let (loc, task, start) = (loc.clone(), task.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut s = spice::store::connect(&loc, Arc::new(SystemClock)).unwrap();
                    let mut ports = vec![5000 + i as u16];
                    ports.extend(shared);
                    let wt = format!("/w/{i}");
                    start.wait();
                    s.reserve_bed_slot(&req(&wt, &task, &ports)).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    };
    let got = race(None);
    let mut slots: Vec<u32> = got.iter().map(|r| r.as_ref().unwrap().slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, (0..N as u32).collect::<Vec<_>>(), "{got:?}");
    let mut s = f.authority();
    assert_eq!(s.bed_slots().unwrap().len(), N);
    // Again, all wanting port 6000: exactly one has it, the others are told so.
    let got = race(Some(6000));
    let won: Vec<_> = got.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{got:?}");
    assert!(got
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| e == &vec![6000]));
    let live = s.bed_slots().unwrap();
    assert_eq!(live.len(), 1, "the losers' earlier rows are gone: {live:?}");
    assert_eq!(live[0].ports, won[0].ports);
}

/// A reservation made under a holding is refused once the claim moved on (renewed to a
/// successor under a new fence, or released): a holder that lost the claim, a host
/// frozen past its lease, cannot take the worktree's slot from the one holding it now.
fn only_the_claim_s_holder_now_reserves_its_slot(f: &Fleet) {
    let mut s = f.authority();
    let (t, old) = claim(&mut *s, "first", "/w/t");
    let mut mine = req("/w/t", &t, &[41001]);
    mine.fence = old.fence;
    let first = s.reserve_bed_slot(&mine).unwrap().unwrap();
    assert_eq!(first.ports, vec![41001]);

    let passed = s
        .renew(&t, &old, Some("successor"), Duration::from_secs(600))
        .unwrap();
    assert_ne!(Some(passed.fence), old.fence);
    let mut new = req("/w/t", &t, &[41002]);
    new.fence = Some(passed.fence);
    s.reserve_bed_slot(&new).unwrap().unwrap();

    let mut late = req("/w/t", &t, &[41003]);
    late.fence = old.fence;
    let e = s.reserve_bed_slot(&late).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{e}");
    assert!(
        e.to_string().contains(&format!(
            "task {t}'s claim is held under fence {} now, not {}",
            passed.fence,
            old.fence.unwrap()
        )),
        "{e}"
    );
    let slot = s
        .bed_slot("/w/t")
        .unwrap()
        .expect("the successor's slot stands");
    assert_eq!(slot.ports, vec![41002], "the successor's ports stand");

    s.release(&t, &Holder::fenced("successor".to_string(), passed.fence))
        .unwrap();
    let e = s.reserve_bed_slot(&new).unwrap_err();
    assert!(e.to_string().contains("is no longer claimed"), "{e}");
}
