//! A refused claim operation is typed (`spice::error::Refusal`), the same on both
//! backends, so a caller decides on what the store says rather than on its words;
//! the words stay what users read (exit code 3, one line naming the task).

use crate::common;
use common::backend::{both, Fleet};
use spice::error::Refusal;
use spice::store::{ClaimRequest, Holder, Takeover};
use std::time::Duration;

both!(each_refusal_says_why_in_a_type_on_every_backend);

fn request(claimant: &str) -> ClaimRequest {
    ClaimRequest {
        claimant: claimant.into(),
        lane: None,
        worktree: None,
        lease: Duration::from_secs(600),
    }
}

fn each_refusal_says_why_in_a_type_on_every_backend(f: &Fleet) {
    let first = f.env.add(&["first"]);
    let waits = f.env.add(&["waits", "--depends", &first]);
    let mut store = f.authority();
    fn refusal<T>(r: Result<T, spice::Error>) -> Refusal {
        let e = r.err().expect("refused");
        assert_eq!(e.exit_code(), 3, "{e}");
        assert!(e.is_conflict());
        e.claim_refusal()
            .cloned()
            .unwrap_or_else(|| panic!("untyped: {e}"))
    }
    let held = store.claim(&first, &request("a")).unwrap();

    assert_eq!(
        refusal(store.claim(&first, &request("b"))),
        Refusal::HeldBy("a".into())
    );
    assert_eq!(
        refusal(store.claim(&waits, &request("b"))),
        Refusal::NotReady
    );
    assert_eq!(
        refusal(store.renew(&first, &Holder::new("b"), None, Duration::from_secs(60))),
        Refusal::HeldBy("a".into())
    );
    let stale = Holder::fenced("a", held.fence + 7);
    assert_eq!(
        refusal(store.renew(&first, &stale, None, Duration::from_secs(60))),
        Refusal::StaleFence {
            seen: held.fence + 7,
            current: held.fence
        }
    );
    let takeover = |fence| Takeover {
        stale_fence: fence,
        claimant: "b".into(),
        lane: None,
        worktree: None,
        lease: Duration::from_secs(60),
        force: false,
    };
    assert_eq!(
        refusal(store.takeover(&first, &takeover(held.fence))),
        Refusal::LeaseLive
    );
    assert_eq!(
        refusal(store.takeover(&first, &takeover(held.fence + 1))),
        Refusal::StaleFence {
            seen: held.fence + 1,
            current: held.fence
        }
    );
    store.release(&first, &Holder::new("a")).unwrap();
    let gone = store
        .renew(&first, &Holder::new("a"), None, Duration::from_secs(60))
        .err()
        .unwrap();
    assert_eq!(gone.claim_refusal(), Some(&Refusal::NotClaimed));
    // The words users read are unchanged.
    assert_eq!(
        gone.to_string(),
        format!("cannot renew task {first} as a: it is not claimed")
    );
    assert_eq!(
        refusal(store.release(&first, &Holder::new("a"))),
        Refusal::NotClaimed
    );
}
