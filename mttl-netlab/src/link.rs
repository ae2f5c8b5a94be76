//! The wire's link model: when each frame leaves, or whether it is dropped.
//!
//! Pure arithmetic on times in nanoseconds, so that it can be tested without
//! a network. The emulated network is a switch with one full-duplex port per
//! host; a frame from host `s` to host `d`:
//!
//! 1. is serialized on `s`'s uplink: it starts when the uplink is free (or on
//!    arrival), and is dropped if the bytes still waiting there plus this
//!    frame exceed the port's queue (drop-tail);
//! 2. is serialized on `d`'s downlink, cut-through: it may start as soon as
//!    its first bit arrived from the uplink, and under the same drop-tail
//!    rule; a frame to several hosts (broadcast) goes through each downlink;
//! 3. is handed to `d` one latency after its last bit left the downlink.
//!
//! A frame's size on the wire counts Ethernet's preamble, FCS and
//! inter-frame gap ([`FRAMING_BYTES`]) besides what the hosts see.
//!
//! Per downlink, release times never decrease (each frame finishes after the
//! one before it, and the latency is constant), so each destination's frames
//! can wait in one FIFO queue.

/// Preamble and start delimiter (8), FCS (4) and inter-frame gap (12).
pub const FRAMING_BYTES: u64 = 24;

/// One direction of one port: a line rate and a bounded FIFO in front of it.
#[derive(Debug, Clone)]
pub struct Port {
    rate_bps: u64,
    queue_bytes: u64,
    /// When the last accepted frame's last bit leaves (ns).
    free_at: u64,
}

impl Port {
    pub fn new(rate_bps: u64, queue_bytes: u64) -> Port {
        Port {
            rate_bps,
            queue_bytes,
            free_at: 0,
        }
    }

    /// Nanoseconds to serialize a frame of `size` bytes (as seen by the
    /// hosts) at this port's rate.
    pub fn serialization_ns(&self, size: u64) -> u64 {
        ((size + FRAMING_BYTES) * 8 * 1_000_000_000).div_ceil(self.rate_bps)
    }

    /// Accepts a frame whose first bit may go at `ready` (ns): returns when
    /// its last bit has left, or `None` if the queue is full (the frame is
    /// dropped and the port unchanged).
    pub fn send(&mut self, ready: u64, size: u64) -> Option<u64> {
        let start = ready.max(self.free_at);
        let waiting_ns = start - ready;
        let waiting_bytes =
            (u128::from(waiting_ns) * u128::from(self.rate_bps) / 8_000_000_000) as u64;
        if waiting_bytes + size > self.queue_bytes {
            return None;
        }
        self.free_at = start + self.serialization_ns(size);
        Some(self.free_at)
    }
}

/// The switch: an uplink and a downlink per host, one latency for all.
#[derive(Debug, Clone)]
pub struct Switch {
    uplinks: Vec<Port>,
    downlinks: Vec<Port>,
    latency_ns: u64,
}

impl Switch {
    pub fn new(hosts: usize, rate_bps: u64, queue_bytes: u64, latency_ns: u64) -> Switch {
        Switch {
            uplinks: vec![Port::new(rate_bps, queue_bytes); hosts],
            downlinks: vec![Port::new(rate_bps, queue_bytes); hosts],
            latency_ns,
        }
    }

    /// Changes the latency of frames that enter from now on. A lower one
    /// may release a frame before one that entered earlier; each
    /// destination's queue stays FIFO, so such a frame waits for it.
    pub fn set_latency(&mut self, latency_ns: u64) {
        self.latency_ns = latency_ns;
    }

    /// Step 1: a frame of `size` bytes from `src` arrived at `arrival`;
    /// returns when its last bit reached the switch, or `None` if dropped.
    pub fn enter(&mut self, src: usize, arrival: u64, size: u64) -> Option<u64> {
        self.uplinks[src].send(arrival, size)
    }

    /// Steps 2 and 3: the frame that reached the switch at `entered` goes to
    /// `dst`; returns when `dst` gets it, or `None` if dropped.
    pub fn leave(&mut self, dst: usize, entered: u64, size: u64) -> Option<u64> {
        let port = &mut self.downlinks[dst];
        let first_bit = entered.saturating_sub(port.serialization_ns(size));
        port.send(first_bit, size).map(|t| t + self.latency_ns)
    }

    /// Both: a frame from `src` to `dst` alone.
    pub fn forward(&mut self, src: usize, dst: usize, arrival: u64, size: u64) -> Option<u64> {
        let entered = self.enter(src, arrival, size)?;
        self.leave(dst, entered, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 Mb/s: 10 ns a bit, 80 ns a byte.
    const RATE: u64 = 100_000_000;

    #[test]
    fn a_lone_frame_takes_serialization_plus_latency() {
        let mut s = Switch::new(2, RATE, 64 * 1024, 20_000);
        // 1514 + 24 bytes at 80 ns.
        assert_eq!(s.forward(0, 1, 1_000, 1514), Some(1_000 + 123_040 + 20_000));
        // A small frame, long after: only its own time.
        assert_eq!(
            s.forward(1, 0, 10_000_000, 60),
            Some(10_000_000 + 6_720 + 20_000)
        );
    }

    #[test]
    fn back_to_back_frames_leave_at_the_line_rate() {
        let mut s = Switch::new(2, RATE, 64 * 1024, 20_000);
        let out: Vec<u64> = (0..4).map(|_| s.forward(0, 1, 0, 1514).unwrap()).collect();
        assert_eq!(out, [143_040, 266_080, 389_120, 512_160]);
    }

    #[test]
    fn two_senders_share_the_receiver_downlink() {
        let mut s = Switch::new(3, RATE, 64 * 1024, 0);
        let a = s.forward(0, 2, 0, 976).unwrap(); // 1000 bytes: 80 µs
        let b = s.forward(1, 2, 0, 976).unwrap();
        assert_eq!((a, b), (80_000, 160_000));
        // The other direction is free.
        assert_eq!(s.forward(2, 0, 0, 976), Some(80_000));
    }

    #[test]
    fn a_full_queue_drops_the_tail_and_recovers() {
        // Room for 3000 waiting bytes; 1000-byte frames (976 + framing) that
        // all arrive at once.
        let mut p = Port::new(RATE, 3_000);
        let out: Vec<Option<u64>> = (0..5).map(|_| p.send(0, 976)).collect();
        // Frame k waits k*1000 bytes: 0, 1000, 2000 fit with 976 more; 3000
        // does not.
        assert_eq!(
            out,
            [Some(80_000), Some(160_000), Some(240_000), None, None]
        );
        // Once the first two frames are out, there is room again.
        assert_eq!(p.send(160_000, 976), Some(320_000));
    }

    #[test]
    fn release_times_per_destination_never_decrease() {
        let mut s = Switch::new(3, RATE, 16 * 1024, 5_000);
        let mut last = [0u64; 3];
        let mut now = 0;
        for i in 0..500u64 {
            now += (i * 7919) % 30_000;
            let src = (i % 3) as usize;
            let dst = ((i + 1) % 3) as usize;
            let size = 60 + (i * 104_729) % 1455;
            if let Some(t) = s.forward(src, dst, now, size) {
                assert!(t >= last[dst] && t > now);
                last[dst] = t;
            }
        }
    }
}
