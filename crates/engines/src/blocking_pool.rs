//! The event engine's pool for dynamic exchanges: an event loop must never block, so it
//! hands a connection with a dynamic request to one of these threads, which runs
//! `exchange::run` with blocking I/O and gives the connection back (nginx's
//! `thread_pool`: a fixed number of threads behind a bounded queue). Threads start on demand
//! up to the limit, so a server without dynamic content runs none. A full queue is refused
//! (`submit` gives the job back) and the loop answers 503.

use crate::session::ThreadCtx;
use crate::shared::Shared;
use gearshift_core::lifecycle::unix_now;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a pool thread does with each item, with that thread's context (clock, log buffer).
pub type Handler<T> = Box<dyn Fn(T, &mut ThreadCtx) + Send + Sync>;

struct State<T> {
    /// Jobs with when they were queued, oldest first.
    queue: VecDeque<(T, Instant)>,
    alive: usize,
    idle: usize,
    stop: bool,
}

pub struct BlockingPool<T> {
    state: Mutex<State<T>>,
    handler: Handler<T>,
    /// How long a job may wait, and what is done with one that waited longer.
    deadline: Option<(Duration, Handler<T>)>,
    ready: Condvar,
    threads: usize,
    queue: usize,
    shared: Arc<Shared>,
}

impl<T: Send + 'static> BlockingPool<T> {
    pub fn new(
        threads: usize,
        queue: usize,
        shared: Arc<Shared>,
        handler: Handler<T>,
        deadline: Option<(Duration, Handler<T>)>,
    ) -> Arc<BlockingPool<T>> {
        Arc::new(BlockingPool {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                alive: 0,
                idle: 0,
                stop: false,
            }),
            ready: Condvar::new(),
            handler,
            deadline,
            threads: threads.max(1),
            queue: queue.max(1),
            shared,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue an item, starting a thread if none is idle and the limit allows. Gives the
    /// item back when the queue is full (or the pool stopped).
    pub fn submit(self: &Arc<Self>, job: T) -> Result<(), T> {
        let mut st = self.lock();
        if st.stop || st.queue.len() >= self.queue {
            return Err(job);
        }
        st.queue.push_back((job, Instant::now()));
        if st.idle < st.queue.len() && st.alive < self.threads {
            let me = self.clone();
            if std::thread::Builder::new()
                .name("dynamic".into())
                .spawn(move || me.run())
                .is_ok()
            {
                st.alive += 1;
            }
        }
        if st.alive == 0 {
            // No thread could start: refuse rather than strand the job.
            return Err(st.queue.pop_back().expect("just pushed").0);
        }
        drop(st);
        self.ready.notify_one();
        Ok(())
    }

    /// Give every job that waited past the deadline to the `expired` handler (on this
    /// thread, with its context). Returns how many there were.
    pub fn expire(&self, w: &mut ThreadCtx) -> usize {
        let Some((limit, expired)) = &self.deadline else {
            return 0;
        };
        let late: Vec<T> = {
            let mut st = self.lock();
            let mut late = Vec::new();
            while st.queue.front().is_some_and(|(_, t)| t.elapsed() > *limit) {
                late.extend(st.queue.pop_front().map(|(j, _)| j));
            }
            late
        };
        let n = late.len();
        for job in late {
            let _ = crate::guard::catch(&self.shared, || expired(job, w));
        }
        n
    }

    /// Let the threads finish the queued items and exit; wait for that at most `limit`
    /// (exchanges end by the drain deadline, and a CGI exchange reaps its script as it
    /// ends, so waiting here keeps the process from exiting with a script unreaped).
    pub fn stop(&self, limit: Duration) {
        self.lock().stop = true;
        self.ready.notify_all();
        let until = std::time::Instant::now() + limit;
        while self.lock().alive > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn run(&self) {
        let mut w = ThreadCtx::new(self.shared.now_ms(), unix_now()).counting(&self.shared);
        loop {
            self.expire(&mut w);
            let job = {
                let mut st = self.lock();
                loop {
                    if let Some((j, _)) = st.queue.pop_front() {
                        break Some(j);
                    }
                    if st.stop {
                        break None;
                    }
                    st.idle += 1;
                    st = self
                        .ready
                        .wait_timeout(st, Duration::from_secs(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    st.idle -= 1;
                }
            };
            let Some(job) = job else { break };
            // A panic loses this job (its connection closes); the thread goes on.
            let _ = crate::guard::catch(&self.shared, || (self.handler)(job, &mut w));
            w.publish(&self.shared);
            if let Some(log) = &mut w.log {
                log.flush();
            }
        }
        self.lock().alive -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn shared() -> Arc<Shared> {
        let svc = gearshift_handlers::Service::with_defaults(&std::env::temp_dir()).unwrap();
        Arc::new(Shared::new(svc, 10_000))
    }

    #[test]
    fn runs_items_and_refuses_beyond_the_queue() {
        let gate = Arc::new(Mutex::new(()));
        let done = Arc::new(AtomicUsize::new(0));
        let (g, d) = (gate.clone(), done.clone());
        let pool: Arc<BlockingPool<u32>> = BlockingPool::new(
            1,
            1,
            shared(),
            Box::new(move |n, _| {
                let _x = g.lock();
                d.fetch_add(n as usize, Ordering::SeqCst);
            }),
            None,
        );
        let held = gate.lock().unwrap();
        assert!(pool.submit(1).is_ok());
        // The one thread takes the first item and blocks; then the queue holds one more.
        while !pool.lock().queue.is_empty() {
            std::thread::yield_now();
        }
        assert!(pool.submit(10).is_ok());
        assert_eq!(pool.submit(100), Err(100), "queue of 1 is full");
        drop(held);
        let start = std::time::Instant::now();
        while done.load(Ordering::SeqCst) < 11 {
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(done.load(Ordering::SeqCst), 11);
        pool.stop(Duration::from_secs(5));
        assert_eq!(pool.lock().alive, 0, "threads exit on stop");
    }

    #[test]
    fn a_job_that_waited_past_the_deadline_goes_to_the_expired_handler() {
        let gate = Arc::new(Mutex::new(()));
        let (ran, late) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (g, r, l) = (gate.clone(), ran.clone(), late.clone());
        let pool: Arc<BlockingPool<u32>> = BlockingPool::new(
            1,
            10,
            shared(),
            Box::new(move |_, _| {
                let _x = g.lock();
                r.fetch_add(1, Ordering::SeqCst);
            }),
            Some((
                Duration::from_millis(50),
                Box::new(move |_, _| {
                    l.fetch_add(1, Ordering::SeqCst);
                }),
            )),
        );
        let held = gate.lock().unwrap();
        assert!(pool.submit(1).is_ok());
        while !pool.lock().queue.is_empty() {
            std::thread::yield_now();
        }
        assert!(pool.submit(2).is_ok());
        let mut w = ThreadCtx::new(0, unix_now());
        assert_eq!(pool.expire(&mut w), 0, "not late yet");
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(pool.expire(&mut w), 1, "late while the thread is busy");
        assert_eq!(late.load(Ordering::SeqCst), 1);
        drop(held);
        pool.stop(Duration::from_secs(5));
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the late job never ran");
    }
}
