//! The shape of a task graph, ranked once and shared: every caller in the process that
//! ranks the same graph (all lanes of a supervisor, the console, a claimant that
//! re-ranks after losing a race) gets the same [`Graph`], with the release counts any
//! of them already computed.
//!
//! The cache is keyed by the graph's shape itself, not by a store generation: a
//! 128-bit fingerprint of what the graph measures read (each open task's id and
//! priority and the ids it waits on, in order). A claim, a renewal, a phase change or
//! an edit of a title changes none of these, so the ranking is reused; a task added,
//! finished or re-prioritized, or a dependency changed, by this process or any other,
//! changes the fingerprint, so no caller can see a stale shape. Readiness (status,
//! wait date, claims) is never cached: the ranking reads it from each snapshot, and a
//! claim re-checks it inside its own transaction.

use super::graph::Shape;
use crate::task::Task;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use xxhash_rust::xxh3::Xxh3;

/// How many shapes the process keeps (the most recently used).
const KEEP: usize = 4;

/// The shape-derived part of a ranking.
pub struct Graph {
    /// For each task, the indices of the tasks in the same slice it waits on.
    pub waits_on: Vec<Vec<usize>>,
    pub shape: Shape,
}

type Key = (u64, u64, usize);

static CACHE: Mutex<Vec<(Key, Arc<Graph>)>> = Mutex::new(Vec::new());

/// Counters for tests and benchmarks: how many shapes were built and reused.
static BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many shapes this process has built (not reused) so far.
pub fn built() -> u64 {
    BUILT.load(std::sync::atomic::Ordering::Relaxed)
}

/// The shape of `tasks`, from the cache when the same shape was seen before.
pub fn of(tasks: &[Task]) -> Arc<Graph> {
    let key = fingerprint(tasks);
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = cache.iter().position(|(k, _)| *k == key) {
            let hit = cache.remove(at);
            let g = hit.1.clone();
            cache.insert(0, hit);
            return g;
        }
    }
    // Built outside the lock: a large graph must not stall callers of other shapes.
    let g = Arc::new(build(tasks));
    BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, existing)) = cache.iter().find(|(k, _)| *k == key) {
        return existing.clone();
    }
    cache.insert(0, (key, g.clone()));
    cache.truncate(KEEP);
    g
}

fn build(tasks: &[Task]) -> Graph {
    let index = ById::of(tasks);
    let waits_on: Vec<Vec<usize>> = tasks
        .iter()
        .map(|t| t.depends.iter().filter_map(|d| index.find(d)).collect())
        .collect();
    let priority: Vec<_> = tasks.iter().map(|t| t.priority).collect();
    let shape = Shape::new(&priority, &waits_on);
    Graph { waits_on, shape }
}

/// Each task's index by its id, through a 64-bit XXH3 of the id: one hash and one
/// comparison per prerequisite. (A binary search over the ids, which a snapshot holds
/// sorted, compared strings scattered over the heap: a tenth of `task next` at
/// 100,000 tasks.) Two ids with one hash, never seen in practice, are found by a scan.
struct ById<'t> {
    tasks: &'t [Task],
    slots: HashMap<u64, u32, std::hash::BuildHasherDefault<Given>>,
}

/// Two ids share this slot: found by a scan.
const SHARED: u32 = u32::MAX;

impl<'t> ById<'t> {
    fn of(tasks: &'t [Task]) -> ById<'t> {
        let mut slots = HashMap::with_capacity_and_hasher(tasks.len(), Default::default());
        for (i, t) in tasks.iter().enumerate() {
            slots
                .entry(xxhash_rust::xxh3::xxh3_64(t.id.as_bytes()))
                .and_modify(|at| *at = SHARED)
                .or_insert(i as u32);
        }
        ById { tasks, slots }
    }

    fn find(&self, id: &str) -> Option<usize> {
        match *self.slots.get(&xxhash_rust::xxh3::xxh3_64(id.as_bytes()))? {
            SHARED => self.tasks.iter().position(|t| t.id == id),
            at => Some(at as usize).filter(|&at| self.tasks[at].id == id),
        }
    }
}

/// A hasher for keys that are hashes already: the key is the hash.
#[derive(Default)]
struct Given(u64);

impl std::hash::Hasher for Given {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A 128-bit XXH3 of everything the graph measures depend on (each field
/// length-prefixed, so no two different graphs feed the hash the same bytes), and the
/// task count.
fn fingerprint(tasks: &[Task]) -> Key {
    let mut h = Xxh3::new();
    let field = |h: &mut Xxh3, b: &[u8]| {
        h.update(&(b.len() as u32).to_le_bytes());
        h.update(b);
    };
    for t in tasks {
        field(&mut h, t.id.as_bytes());
        field(&mut h, t.priority.map_or("", |p| p.as_str()).as_bytes());
        h.update(&(t.depends.len() as u32).to_le_bytes());
        for d in &t.depends {
            field(&mut h, d.as_bytes());
        }
    }
    let x = h.digest128();
    ((x >> 64) as u64, x as u64, tasks.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Priority, Status};

    fn task(id: &str, prio: Option<Priority>, deps: &[&str]) -> Task {
        Task {
            id: id.into(),
            uuid: String::new(),
            title: id.into(),
            body: String::new(),
            project: None,
            phase: "todo".into(),
            priority: prio,
            due: None,
            wait: None,
            tags: vec![],
            status: Status::Pending,
            entry: 0,
            end: None,
            modified: 0,
            depends: deps.iter().map(|d| d.to_string()).collect(),
            annotations: vec![],
        }
    }

    #[test]
    fn prerequisites_are_found_by_id_in_any_order_and_through_a_shared_slot() {
        let tasks = vec![
            task("by-c", None, &["by-a", "by-gone"]),
            task("by-a", None, &[]),
            task("by-b", None, &["by-c", "by-a"]),
        ];
        let g = build(&tasks);
        assert_eq!(g.waits_on, vec![vec![1], vec![], vec![0, 1]]);
        // Two ids in one slot (a hash collision, made by hand) are told apart by a scan;
        // an id the slot does not hold is not taken for the one it does.
        let mut index = ById::of(&tasks);
        for id in ["by-a", "by-b"] {
            index
                .slots
                .insert(xxhash_rust::xxh3::xxh3_64(id.as_bytes()), SHARED);
        }
        assert_eq!(index.find("by-a"), Some(1));
        assert_eq!(index.find("by-b"), Some(2));
        assert_eq!(index.find("by-c"), Some(0));
        index
            .slots
            .insert(xxhash_rust::xxh3::xxh3_64(b"by-gone"), 0);
        assert_eq!(index.find("by-gone"), None);
    }

    #[test]
    fn the_same_shape_is_shared_and_a_changed_one_is_not() {
        let mut tasks = vec![
            task("shape-a", None, &[]),
            task("shape-b", Some(Priority::H), &["shape-a"]),
        ];
        let g1 = of(&tasks);
        // A title, a phase, a status: not the shape.
        tasks[0].title = "renamed".into();
        tasks[1].phase = "review".into();
        let g2 = of(&tasks);
        assert!(Arc::ptr_eq(&g1, &g2));
        // A priority and a dependency are.
        tasks[1].priority = Some(Priority::L);
        let g3 = of(&tasks);
        assert!(!Arc::ptr_eq(&g1, &g3));
        assert_eq!(g3.shape.inherited[0], Some(Priority::L));
        tasks[1].depends.clear();
        let g4 = of(&tasks);
        assert!(g4.waits_on[1].is_empty());
        assert_eq!(g4.shape.releases(&[0]), vec![0]);
    }
}
