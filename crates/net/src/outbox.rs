//! The packets queued towards the sandbox, bounded: beyond the limit they are dropped and
//! counted.

use std::collections::VecDeque;

/// Packets waiting to be written into the sandbox.
#[derive(Debug)]
pub(crate) struct Outbox {
    queue: VecDeque<Vec<u8>>,
    max: usize,
    /// Packets dropped because the queue was full.
    pub dropped: u64,
}

impl Outbox {
    /// A queue holding at most `max` packets.
    pub fn new(max: usize) -> Outbox {
        Outbox {
            queue: VecDeque::new(),
            max,
            dropped: 0,
        }
    }

    /// Whether another packet would be dropped.
    pub fn is_full(&self) -> bool {
        self.queue.len() >= self.max
    }

    /// Queues `packet`, or drops it (counted) when the queue is full.
    pub fn push(&mut self, packet: Vec<u8>) {
        if self.is_full() {
            self.dropped += 1;
        } else {
            self.queue.push_back(packet);
        }
    }

    /// The oldest packet.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.queue.pop_front()
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}
