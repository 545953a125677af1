//! A provider thread's two queues of jobs ([`Lane`]): what an operator or a hook waits
//! on now goes ahead of the bulk, each lane in order of arrival; when the thread ends
//! (by a panic too) what is still queued is dropped and nothing more is taken.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// Which of the provider thread's queues a call waits in: [`Lane::Prompt`] is served
/// first, [`Lane::Bulk`] when it is empty; each in order of arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Small calls someone is waiting on now: an answer's plan (its POST returns after
    /// it), a spooled prompt (the hook → view path).
    Prompt,
    /// Everything else: transcripts (long catch-ups included), screens, launches.
    Bulk,
}

pub(super) struct Lanes<T> {
    prompt: VecDeque<T>,
    bulk: VecDeque<T>,
    /// Every handle is gone: the thread ends once the queues are empty.
    closed: bool,
    /// The thread has ended (or died): nothing queued will run.
    stopped: bool,
}

/// The provider thread's two queues (of jobs; generic for its tests).
pub(super) struct Queue<T> {
    lanes: Mutex<Lanes<T>>,
    ready: Condvar,
}

impl<T> Queue<T> {
    pub(super) fn new() -> Self {
        let lanes = Lanes { prompt: VecDeque::new(), bulk: VecDeque::new(), closed: false, stopped: false };
        Queue { lanes: Mutex::new(lanes), ready: Condvar::new() }
    }

    /// Queue `job`; on a queue whose thread has stopped it is dropped (its caller sees
    /// the provider unavailable).
    pub(super) fn push(&self, lane: Lane, job: T) {
        let mut l = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if l.stopped {
            return;
        }
        match lane {
            Lane::Prompt => l.prompt.push_back(job),
            Lane::Bulk => l.bulk.push_back(job),
        }
        self.ready.notify_one();
    }

    /// No more jobs will come (every handle is gone): the thread ends once the queues
    /// are empty.
    pub(super) fn close(&self) {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.ready.notify_one();
    }

    /// The next job, prompts first; None once closed and drained.
    pub(super) fn pop(&self) -> Option<T> {
        let mut l = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = l.prompt.pop_front().or_else(|| l.bulk.pop_front()) {
                return Some(job);
            }
            if l.closed {
                return None;
            }
            l = self.ready.wait(l).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Held by the provider thread: when it ends, by a panic too, what is still queued is
/// dropped (each caller sees the provider unavailable) and nothing more is queued.
pub(super) struct Stopped<T>(pub(super) Arc<Queue<T>>);

impl<T> Drop for Stopped<T> {
    fn drop(&mut self) {
        let mut l = self.0.lanes.lock().unwrap_or_else(|e| e.into_inner());
        l.stopped = true;
        l.prompt.clear();
        l.bulk.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prompts go first, each lane in order; a closed queue is drained before the
    /// thread stops, and a stopped one takes nothing more.
    #[test]
    fn prompts_are_served_before_the_bulk_and_a_stopped_queue_takes_nothing() {
        let q = Queue::new();
        q.push(Lane::Bulk, "parse 1");
        q.push(Lane::Bulk, "parse 2");
        q.push(Lane::Prompt, "plan a");
        q.push(Lane::Bulk, "parse 3");
        q.push(Lane::Prompt, "plan b");
        q.lanes.lock().unwrap().closed = true;
        let order: Vec<&str> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["plan a", "plan b", "parse 1", "parse 2", "parse 3"]);
        let q = Arc::new(q);
        drop(Stopped(q.clone()));
        q.push(Lane::Prompt, "too late");
        assert!(q.pop().is_none());
    }

    /// The thread waits for work and wakes for it; the last handle gone ends it.
    #[test]
    fn the_thread_waits_for_work_and_ends_with_the_last_sender() {
        let q = Arc::new(Queue::new());
        let rx = q.clone();
        let worker = std::thread::spawn(move || std::iter::from_fn(|| rx.pop()).collect::<Vec<u32>>());
        std::thread::sleep(std::time::Duration::from_millis(20));
        q.push(Lane::Bulk, 1);
        q.push(Lane::Prompt, 2);
        {
            let mut l = q.lanes.lock().unwrap();
            l.closed = true;
            q.ready.notify_one();
        }
        let got = worker.join().unwrap();
        assert_eq!(got.len(), 2, "both run before the thread ends: {got:?}");
    }
}
