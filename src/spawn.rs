//! The one place saql starts threads and tasks: clippy's `disallowed-methods` (clippy.toml)
//! refuses the raw calls everywhere else. Every thread is named (as `ps -L`, `top -H` and
//! panics show it) and gets the stack the planner and the operators may need (deep, but
//! allowed, expressions recurse: [`THREAD_STACK_BYTES`], committed only as it is touched);
//! every task runs on the runtime of its caller (the server's).

use std::cell::Cell;
use std::io;
use std::sync::Mutex;
use std::thread::{JoinHandle, Scope, ScopedJoinHandle};

use crate::limits::THREAD_STACK_BYTES;

/// Starts a thread named `name`.
pub fn thread<T: Send + 'static>(
    name: impl Into<String>,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    #[allow(clippy::disallowed_methods, reason = "the one place threads start")]
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(work)
}

/// Starts a thread named `name` within `scope`: it may borrow what outlives the scope, and
/// the scope ends only once it has.
pub fn scoped<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    name: impl Into<String>,
    work: impl FnOnce() -> T + Send + 'scope,
) -> io::Result<ScopedJoinHandle<'scope, T>> {
    #[allow(clippy::disallowed_methods, reason = "the one place threads start")]
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(THREAD_STACK_BYTES)
        .spawn_scoped(scope, work)
}

/// Runs `work` on each of `shares` at once: the first on this thread, each other on a scoped
/// thread named `name` (or on this one, after the others, if it cannot start); the results in
/// the order of `shares`.
pub fn each_in_parallel<S: Send, T: Send>(
    name: &str,
    shares: Vec<S>,
    work: impl Fn(S) -> T + Sync,
) -> Vec<T> {
    // Each share behind a lock of its own: one whose thread cannot start is taken back.
    let slots: Vec<Mutex<Option<S>>> = shares.into_iter().map(|s| Mutex::new(Some(s))).collect();
    let Some((first, rest)) = slots.split_first() else {
        return Vec::new();
    };
    let work = &work;
    let run = |slot: &Mutex<Option<S>>| take(slot).map(|share| parallel_section(|| work(share)));
    let run = &run;
    std::thread::scope(|s| {
        let others: Vec<_> = rest
            .iter()
            .map(|slot| (slot, scoped(s, name, move || run(slot))))
            .collect();
        let mut out: Vec<T> = run(first).into_iter().collect();
        for (slot, started) in others {
            let done = match started {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => {
                    tracing::warn!("starting a {name} thread: {e}; running on this one");
                    None
                }
            };
            out.extend(done.or_else(|| run(slot)));
        }
        out
    })
}

fn take<S>(slot: &Mutex<Option<S>>) -> Option<S> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

thread_local! {
    /// Whether this thread runs a share of work already spread over the cores.
    static IN_PARALLEL_SECTION: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` as a share of work spread over the cores: what it calls sees
/// [`in_parallel_section`] and does not spread again (the cores are busy already).
pub fn parallel_section<T>(work: impl FnOnce() -> T) -> T {
    /// Restores the flag as it was, also when `work` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_PARALLEL_SECTION.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(IN_PARALLEL_SECTION.with(|p| p.replace(true)));
    work()
}

/// Whether this thread runs inside [`parallel_section`].
pub fn in_parallel_section() -> bool {
    IN_PARALLEL_SECTION.with(Cell::get)
}

/// Runs `future` as a task of the current runtime.
pub fn task<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[allow(clippy::disallowed_methods, reason = "the one place tasks start")]
    tokio::task::spawn(future)
}

/// Runs `future` as a task of the caller's runtime (the server's) or, for a library caller
/// with none, on a thread named `name` with a small runtime of its own; `no_runtime` is told
/// why, should that runtime fail to start.
pub fn task_or_thread<F>(
    name: String,
    future: F,
    no_runtime: impl FnOnce(io::Error) + Send + 'static,
) -> io::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        task(future);
        return Ok(());
    }
    thread(
        name,
        move || match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(future),
            Err(e) => no_runtime(e),
        },
    )
    .map(|_| ())
}

/// Runs `future` as a task of the current runtime, in `set` (which cancels it when dropped).
#[cfg(feature = "server")]
pub fn task_in<F>(set: &mut tokio::task::JoinSet<F::Output>, future: F)
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[allow(clippy::disallowed_methods, reason = "the one place tasks start")]
    set.spawn(future);
}

/// Runs `work` (operators over a batch, a checkpoint: anything that computes or waits for
/// the disk) on the current runtime's blocking threads, so that it never holds up the async
/// workers that serve the other sessions.
pub fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    #[allow(clippy::disallowed_methods, reason = "the one place tasks start")]
    tokio::task::spawn_blocking(work)
}
