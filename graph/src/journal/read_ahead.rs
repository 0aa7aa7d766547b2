//! Reading a journal ahead on a second thread: entries parsed and hashed while the first thread
//! folds and evaluates the ones before.

use std::io::BufRead;

use super::{JournalError, JournalReader};
use crate::event::Entry;
use crate::object::Object;
use crate::world::Prepared;

/// An entry read ahead: parsed, checked and its object hashed by the reading thread.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedEntry {
    /// The entry's sequence number.
    pub seq: u64,
    /// The event with its object's digest.
    pub prepared: Prepared,
}

/// Entries handed from the reading thread to the folding thread at a time: large enough that
/// the channel costs nothing per entry, small enough that the first evaluation starts at once.
const READ_AHEAD_CHUNK: usize = 256;
/// Chunks in flight between the threads: bounds the memory read ahead.
const READ_AHEAD_CHUNKS: usize = 4;

/// Objects the folding thread is done with (replaced or removed from its World), handed back
/// to the reading thread that allocated them, which frees them between chunks: freeing is then
/// local to the allocating thread and off the folding thread's path.
pub struct Recycler {
    batch: Vec<Object>,
    back: Option<std::sync::mpsc::SyncSender<Vec<Object>>>,
}

impl Recycler {
    /// Hands `object` back to be freed on the reading thread (or here, when that thread is gone
    /// or behind).
    pub fn recycle(&mut self, object: Object) {
        if self.back.is_none() {
            return;
        }
        self.batch.push(object);
        if self.batch.len() == READ_AHEAD_CHUNK {
            let full = std::mem::replace(&mut self.batch, Vec::with_capacity(READ_AHEAD_CHUNK));
            if let Some(back) = &self.back {
                // Full or gone: the batch comes back in the error and is freed here.
                drop(back.try_send(full));
            }
        }
    }
}

impl<R: BufRead + Send> JournalReader<R> {
    /// Runs `consume` over the journal's entries while a second thread reads, parses and hashes
    /// them ahead ([`Prepared`]), so folding and evaluating (one thread) overlaps with decoding
    /// (the other). The entries and the error, if any, arrive in the same order and are the
    /// same as from iterating the reader; at most a few hundred entries are read ahead. When
    /// `consume` stops early the reading thread stops too. Without a second thread (spawning
    /// failed) the entries are read on this one. Objects given to the [`Recycler`] are freed on
    /// the reading thread.
    pub fn read_ahead<T>(
        self,
        consume: impl FnOnce(&mut dyn Iterator<Item = Result<PreparedEntry, JournalError>>, &mut Recycler) -> T,
    ) -> T {
        // Borrowed by the reading thread, so the reader is still here if it cannot be spawned.
        let slot = std::sync::Mutex::new(Some(self));
        let take = || slot.lock().ok().and_then(|mut r| r.take());
        std::thread::scope(|scope| {
            let (tx, rx) =
                std::sync::mpsc::sync_channel::<Vec<Result<PreparedEntry, JournalError>>>(READ_AHEAD_CHUNKS);
            let (back, garbage) = std::sync::mpsc::sync_channel::<Vec<Object>>(READ_AHEAD_CHUNKS);
            let spawned = std::thread::Builder::new()
                .name("journal-reader".into())
                .spawn_scoped(scope, move || {
                    let Some(journal) = take() else { return };
                    let mut chunk = Vec::with_capacity(READ_AHEAD_CHUNK);
                    for item in journal.map(prepare) {
                        chunk.push(item);
                        if chunk.len() == READ_AHEAD_CHUNK {
                            let full = std::mem::replace(&mut chunk, Vec::with_capacity(READ_AHEAD_CHUNK));
                            if tx.send(full).is_err() {
                                return;
                            }
                            garbage.try_iter().for_each(drop);
                        }
                    }
                    if !chunk.is_empty() {
                        let _ = tx.send(chunk);
                    }
                });
            let mut recycler = Recycler {
                batch: Vec::new(),
                back: spawned.is_ok().then_some(back),
            };
            if spawned.is_err() {
                drop(rx);
                let mut local = take().into_iter().flatten().map(prepare);
                return consume(&mut local, &mut recycler);
            }
            let mut entries = rx.into_iter().flatten();
            let result = consume(&mut entries, &mut recycler);
            // Dropping the receiver ends a reading thread still running, before the scope joins it.
            drop(entries);
            drop(recycler);
            result
        })
    }
}

fn prepare(item: Result<Entry, JournalError>) -> Result<PreparedEntry, JournalError> {
    item.map(|Entry { seq, event }| PreparedEntry {
        seq,
        prepared: Prepared::new(event),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::journal::JournalWriter;
    use serde_json::json;

    fn numbered_journal(events: usize) -> Vec<u8> {
        let mut w = JournalWriter::new(Vec::new());
        for i in 0..events {
            let o = Object::new("User", "ns", format!("u{}", i % 7), json!({"v": i}));
            w.append(&Event::Applied(o)).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn reading_ahead_yields_the_same_entries_hashed_and_the_same_error_at_the_same_line() {
        let mut bytes = numbered_journal(1000);
        bytes.extend_from_slice(b"{\"type\":\"tick\",\"seq\":5,\"now\":\"2027-01-01T00:00:00Z\"}\n");
        bytes.extend_from_slice(&numbered_journal(3));
        let plain: Vec<_> = JournalReader::new(&bytes[..]).collect();
        let ahead: Vec<_> = JournalReader::new(&bytes[..]).read_ahead(|it, _| it.collect());
        assert_eq!(ahead.len(), plain.len());
        assert_eq!(ahead.len(), 1001, "1000 entries, then the error, then nothing");
        for (a, p) in ahead.iter().zip(&plain) {
            match (a, p) {
                (Ok(a), Ok(p)) => {
                    assert_eq!(a.seq, p.seq);
                    assert_eq!(a.prepared.event(), &p.event);
                    assert_eq!(a.prepared, Prepared::new(p.event.clone()));
                }
                (Err(a), Err(p)) => assert_eq!(a.to_string(), p.to_string()),
                _ => panic!("read ahead {a:?}, plainly {p:?}"),
            }
        }
        let last = ahead.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(
            last.contains("line 1001") && last.contains("seq 5 comes after seq 1000"),
            "{last}"
        );
    }

    #[test]
    fn a_consumer_that_stops_early_ends_the_reading_thread() {
        // Far more than the chunks in flight: the reader must notice the consumer left.
        let bytes = numbered_journal(20 * READ_AHEAD_CHUNK * READ_AHEAD_CHUNKS);
        let first: Vec<u64> =
            JournalReader::new(&bytes[..]).read_ahead(|it, _| it.take(3).map(|e| e.unwrap().seq).collect());
        assert_eq!(first, vec![1, 2, 3]);
    }

    #[test]
    fn a_prepared_event_carries_the_digest_the_world_would_compute() {
        let o = Object::new("User", "ns", "a", json!({"spec": {"b": 1, "a": [true, null]}}));
        let mut world = crate::World::new();
        world.apply_prepared(Prepared::new(Event::Applied(o.clone())));
        let (_, held) = world.get_with_digest(&o.key()).unwrap();
        assert_eq!(*held, crate::canonical::digest_object(&o));
    }
}
