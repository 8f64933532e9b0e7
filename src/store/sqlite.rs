//! The SQLite side of [`Authority`]: each method delegates to [`Store`]'s own.

use super::authority::{Authority, Cell};
use super::vocab::{Checkpoint, Directive, Filter};
use super::{
    AckRecord, BedSlot, Budget, BudgetRow, BudgetScope, BudgetState, Claim, ClaimRequest,
    ClaimView, ConscienceEntry, Generation, Holder, ImportReport, Item, LaneRow, LedgerEntry,
    ListFilter, Metered, NewStep, Outcome, PhaseOutcome, Proposal, Scope, SessionUsage, ShortIds,
    SlotRequest, Snapshot, Store, Takeover, Target, TaskUpdate, Waited,
};
use super::{LaneTake, SupervisorRow};
use crate::clock::Micros;
use crate::error::Result;
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Task};
use std::time::Duration;

impl Authority for Store {
    fn describe(&self) -> String {
        self.path().display().to_string()
    }
    fn now(&mut self) -> Result<Micros> {
        Ok(Store::now(self))
    }
    fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task> {
        Store::add_task(self, new, depends)
    }
    fn task(&mut self, input: &str) -> Result<Task> {
        Store::task(self, input)
    }
    fn dependents(&mut self, input: &str) -> Result<Vec<String>> {
        Store::dependents(self, input)
    }
    fn short_ids(&mut self) -> Result<ShortIds> {
        Store::short_ids(self)
    }
    fn short_ids_of(&mut self, ids: &[&str]) -> Result<ShortIds> {
        Store::short_ids_of(self, ids)
    }
    fn snapshot(&mut self) -> Result<Snapshot> {
        Store::snapshot(self)
    }
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>> {
        Store::last_cell(self, claimant)
    }
    fn done_tasks(&mut self, limit: usize) -> Result<(usize, Vec<Task>)> {
        let mut done = Store::list(
            self,
            &super::ListFilter {
                statuses: vec![crate::task::Status::Completed],
                ..super::ListFilter::default()
            },
        )?;
        let total = done.len();
        done.sort_by_key(|t| std::cmp::Reverse(t.end.unwrap_or(t.modified)));
        done.truncate(limit);
        Ok((total, done))
    }
    fn claim_view(&mut self, claimant: &str, have: Option<i64>) -> Result<ClaimView> {
        Store::claim_view(self, claimant, have)
    }
    fn ranking_graph(&mut self) -> Result<(i64, Vec<Task>)> {
        Store::ranking_graph(self)
    }
    fn keep_ranking(&mut self, graph: i64, data: &[u8]) -> Result<bool> {
        Store::keep_ranking(self, graph, data)
    }
    fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim> {
        Store::claim(self, input, req)
    }
    fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &Filter,
    ) -> Result<Option<Claim>> {
        Store::claim_first_ready(self, ids, req, filter)
    }
    fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim> {
        Store::renew(self, input, holder, successor, lease)
    }
    fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim> {
        Store::takeover(self, input, t)
    }
    fn release(&mut self, input: &str, holder: &Holder) -> Result<String> {
        Store::release(self, input, holder)
    }
    fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        Store::complete_phase(self, input, holder)
    }
    fn claims(&mut self) -> Result<Vec<Claim>> {
        Store::claims(self)
    }
    fn claim_on(&mut self, input: &str) -> Result<Option<Claim>> {
        Store::claim_on(self, input)
    }
    fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>> {
        Store::ledger(self, input)
    }
    fn steer(&mut self, target: &Target, text: &str, ttl: Duration) -> Result<Item> {
        Store::steer(self, target, text, ttl)
    }
    fn inbox(&mut self, targets: &[Target], all: bool) -> Result<Vec<Item>> {
        Store::inbox(self, targets, all)
    }
    fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        Store::mark_shown(self, keys)
    }
    fn acks_for(&mut self, key: &str) -> Result<Vec<AckRecord>> {
        Store::acks_for(self, key)
    }
    fn resolve_session(&mut self, typed: &str) -> Result<String> {
        Store::resolve_session(self, typed)
    }
    fn apply_acks_in(
        &mut self,
        directives: &[Directive],
        source: &str,
        scope: Scope<'_>,
    ) -> Result<Vec<Outcome>> {
        Store::apply_acks_in(self, directives, source, scope)
    }
    fn transcript_checkpoint(&mut self, path: &str) -> Result<Option<Checkpoint>> {
        Store::transcript_checkpoint(self, path)
    }
    fn apply_transcript(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
    ) -> Result<Vec<Outcome>> {
        Store::apply_transcript(self, path, at, directives, writer)
    }
    fn lanes(&mut self) -> Result<Vec<LaneRow>> {
        Store::lanes(self)
    }
    fn change_token(&mut self) -> Result<i64> {
        Store::data_version(self)
    }
    fn wait_change(&mut self, seen: i64, timeout: Duration) -> Result<i64> {
        Store::wait_commit(self, seen, timeout)
    }
    fn lane(&mut self, name: &str) -> Result<Option<LaneRow>> {
        Store::lane(self, name)
    }
    fn put_lane(&mut self, lane: &LaneRow) -> Result<LaneRow> {
        Store::put_lane(self, lane)
    }
    fn put_lane_as(&mut self, lane: &LaneRow, runner: i64) -> Result<LaneRow> {
        Store::put_lane_as(self, lane, runner)
    }
    fn lift_hold(&mut self, name: &str) -> Result<()> {
        Store::lift_hold(self, name)
    }
    fn hold(&mut self, input: &str, holder: &Holder, lease: Duration, verb: &str) -> Result<Claim> {
        Store::hold(self, input, holder, lease, verb)
    }
    fn set_claim_worktree(&mut self, input: &str, holder: &Holder, worktree: &str) -> Result<()> {
        Store::set_claim_worktree(self, input, holder, worktree)
    }
    fn note(
        &mut self,
        task_id: &str,
        kind: &str,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<()> {
        Store::note(self, task_id, kind, actor, detail)
    }
    fn ledger_since(&mut self, seq: i64, limit: usize) -> Result<Vec<LedgerEntry>> {
        Store::ledger_since(self, seq, limit)
    }
    fn ledger_of_kinds(
        &mut self,
        task_id: &str,
        kinds: &[&str],
        limit: usize,
    ) -> Result<Vec<LedgerEntry>> {
        Store::ledger_of_kinds(self, task_id, kinds, limit)
    }
    fn ledger_recent_of_kinds(&mut self, kinds: &[&str], limit: usize) -> Result<Vec<LedgerEntry>> {
        Store::ledger_recent_of_kinds(self, kinds, limit)
    }
    fn ledger_head(&mut self) -> Result<i64> {
        Store::ledger_head(self)
    }
    fn acks_head(&mut self) -> Result<i64> {
        Store::acks_head(self)
    }
    fn acks_since(&mut self, seq: i64, limit: usize) -> Result<Vec<(i64, AckRecord)>> {
        Store::acks_since(self, seq, limit)
    }
    fn item(&mut self, key: &str) -> Result<Item> {
        Store::item(self, key)
    }
    fn session_lane(&mut self, session: &str) -> Result<Option<String>> {
        Store::session_lane(self, session)
    }
    fn generation(&mut self) -> Result<Generation> {
        Store::generation(self)
    }
    fn next_awakening(&mut self) -> Result<Option<Micros>> {
        Store::next_awakening(self)
    }
    fn wait_for_change(
        &mut self,
        seen: Generation,
        until: Option<Micros>,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Waited> {
        Store::wait_for_change(self, seen, until, give_up)
    }
    fn release_memory(&mut self) -> Result<()> {
        Store::release_memory(self)
    }
    fn register_supervisor(
        &mut self,
        host: &str,
        pid: u32,
        started: u64,
        lease: Duration,
    ) -> Result<i64> {
        Store::register_supervisor(self, host, pid, started, lease)
    }
    fn supervisor_heartbeat(&mut self, id: i64, lease: Duration) -> Result<()> {
        Store::supervisor_heartbeat(self, id, lease)
    }
    fn end_supervisor(&mut self, id: i64) -> Result<()> {
        Store::end_supervisor(self, id)
    }
    fn supervisors(&mut self) -> Result<Vec<SupervisorRow>> {
        Store::supervisors(self)
    }
    fn take_lane(&mut self, name: &str, supervisor: i64, hosts: &[String]) -> Result<LaneTake> {
        Store::take_lane(self, name, supervisor, hosts)
    }
    fn usage_carry(&mut self, path: &str) -> Result<Option<String>> {
        Store::usage_carry(self, path)
    }
    fn apply_transcript_metered(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
        metered: &Metered,
    ) -> Result<Vec<Outcome>> {
        Store::apply_transcript_metered(self, path, at, directives, writer, metered)
    }
    fn session_usage(&mut self) -> Result<Vec<SessionUsage>> {
        Store::session_usage(self)
    }
    fn budget_state(
        &mut self,
        lane: &str,
        task: Option<&str>,
        lane_floor: Option<u64>,
    ) -> Result<BudgetState> {
        Store::budget_state(self, lane, task, lane_floor)
    }
    fn budget_raise(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        Store::budget_raise(self, scope, tokens)
    }
    fn budget_set(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        Store::budget_set(self, scope, tokens)
    }
    fn budget_stop(&mut self, scope: &BudgetScope) -> Result<()> {
        Store::budget_stop(self, scope)
    }
    fn budget_stopped(&mut self, scope: &BudgetScope, by: Option<(&str, i64)>) -> Result<()> {
        Store::budget_stopped(self, scope, by)
    }
    fn budgets(&mut self) -> Result<Vec<BudgetRow>> {
        Store::budgets(self)
    }
    fn reserve_bed_slot(
        &mut self,
        req: &SlotRequest<'_>,
    ) -> Result<std::result::Result<BedSlot, Vec<u16>>> {
        Store::reserve_bed_slot(self, req)
    }
    fn bed_slots(&mut self) -> Result<Vec<BedSlot>> {
        Store::bed_slots(self)
    }
    fn bed_slot(&mut self, worktree: &str) -> Result<Option<BedSlot>> {
        Store::bed_slot(self, worktree)
    }
    fn conscience_epoch(&mut self, lane: &str) -> Result<i64> {
        Store::conscience_epoch(self, lane)
    }
    fn conscience_compacted(&mut self, lane: &str, n: u64) -> Result<i64> {
        Store::conscience_compacted(self, lane, n)
    }
    fn conscience_fired(&mut self, lane: &str, maxim: &str, epoch: i64) -> Result<Option<String>> {
        Store::conscience_fired(self, lane, maxim, epoch)
    }
    fn conscience_note(&mut self, s: &NewStep<'_>) -> Result<()> {
        Store::conscience_note(self, s)
    }
    fn conscience_publish(
        &mut self,
        s: &NewStep<'_>,
        text: &str,
        ttl: Duration,
    ) -> Result<Option<String>> {
        Store::conscience_publish(self, s, text, ttl)
    }
    fn conscience_log(&mut self, lane: Option<&str>, limit: usize) -> Result<Vec<ConscienceEntry>> {
        Store::conscience_log(self, lane, limit)
    }
    fn expire_reminders(&mut self, lane: &str, why: &str) -> Result<Vec<String>> {
        Store::expire_reminders(self, lane, why)
    }
    fn proposal(&mut self, theme: &str) -> Result<Option<Proposal>> {
        Store::proposal(self, theme)
    }
    fn record_proposal(&mut self, theme: &str, task_id: &str) -> Result<bool> {
        Store::record_proposal(self, theme, task_id)
    }
    fn each_task(
        &mut self,
        filter: &ListFilter,
        f: &mut dyn FnMut(Task) -> Result<()>,
    ) -> Result<()> {
        Store::each_task(self, filter, f)
    }
    fn modify(&mut self, input: &str, up: &TaskUpdate) -> Result<Task> {
        Store::modify(self, input, up)
    }
    fn annotate(&mut self, input: &str, text: &str) -> Result<Task> {
        Store::annotate(self, input, text)
    }
    fn change_deps(&mut self, input: &str, add: &[String], remove: &[String]) -> Result<()> {
        Store::change_deps(self, input, add, remove)
    }
    fn flow(&mut self, project: Option<&str>) -> Result<Vec<String>> {
        Store::flow(self, project)
    }
    fn set_flow(&mut self, project: Option<&str>, phases: &[String]) -> Result<()> {
        Store::set_flow(self, project, phases)
    }
    fn set_phase(&mut self, input: &str, phase: &str, holder: Option<&Holder>) -> Result<()> {
        Store::set_phase(self, input, phase, holder)
    }
    fn done(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        Store::done(self, input, holder)
    }
    fn delete(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        Store::delete(self, input, holder)
    }
    fn import(&mut self, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
        Store::import(self, tasks, source)
    }
}
