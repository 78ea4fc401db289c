//! Closed-form results of the finite-source M/M/m/K/N queue paper 001 models Apache with
//! (Lavenberg's handbook, its reference [13]): N customers think for Exp(1/lambda), queue in
//! a buffer of K places (the accept queue; arrivals finding it full return to thinking),
//! and are served by m servers at rate mu each. A birth-death chain on n = 0..=min(N, m+K).

use serde::Serialize;

/// Steady-state results.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MmmknResult {
    /// Completions per second.
    pub throughput: f64,
    /// Mean time from entering the queue to leaving service, seconds.
    pub response_s: f64,
    /// Mean time waiting in the queue, seconds.
    pub wait_s: f64,
    /// Mean number waiting in the queue.
    pub queue_len: f64,
    /// Mean number in the system (queue + service).
    pub in_system: f64,
    /// Share of arrivals that find the buffer full.
    pub blocking: f64,
}

/// M/M/m/K/N with think rate `lambda` per idle customer and service rate `mu` per server.
pub fn mmmkn(lambda: f64, mu: f64, m: usize, k: usize, n: usize) -> MmmknResult {
    let cap = n.min(m + k);
    // Unnormalised probabilities in log space would only matter for N in the tens of
    // thousands; ratios are formed step by step and rescaled to avoid overflow.
    let mut p = vec![1.0f64; cap + 1];
    for i in 1..=cap {
        let birth = (n - (i - 1)) as f64 * lambda;
        let death = i.min(m) as f64 * mu;
        p[i] = p[i - 1] * birth / death;
        if p[i] > 1e250 {
            for q in p.iter_mut().take(i + 1) {
                *q /= 1e250;
            }
        }
    }
    let total: f64 = p.iter().sum();
    p.iter_mut().for_each(|q| *q /= total);
    let mut throughput = 0.0;
    let mut in_system = 0.0;
    let mut queue_len = 0.0;
    let mut offered = 0.0;
    for (i, q) in p.iter().enumerate() {
        throughput += q * i.min(m) as f64 * mu;
        in_system += q * i as f64;
        queue_len += q * i.saturating_sub(m) as f64;
        offered += q * (n - i) as f64 * lambda;
    }
    let blocked = if cap < n {
        p[cap] * (n - cap) as f64 * lambda
    } else {
        0.0
    };
    MmmknResult {
        throughput,
        response_s: in_system / throughput,
        wait_s: queue_len / throughput,
        queue_len,
        in_system,
        blocking: if offered > 0.0 {
            blocked / offered
        } else {
            0.0
        },
    }
}

/// Paper 001 Eq. (2): the page service rate when a worker is held for the burst and the
/// keep-alive timeout, mu_m = 1 / (BurstLength x ST_m + KeepAliveTimeout).
pub fn page_service_rate(burst_length: f64, service_time_s: f64, keepalive_s: f64) -> f64 {
    1.0 / (burst_length * service_time_s + keepalive_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_server_infinite_source_limit_is_mm1() {
        // N large, lambda small with N*lambda fixed, K large: M/M/1 with rho = 0.5.
        let r = mmmkn(0.5 / 100_000.0, 1.0, 1, 10_000, 100_000);
        assert!((r.response_s - 2.0).abs() < 0.01, "{r:?}");
        assert!((r.throughput - 0.5).abs() < 1e-3);
    }

    #[test]
    fn enough_servers_means_no_queue() {
        let r = mmmkn(1.0, 2.0, 10, 5, 10);
        assert!(
            r.queue_len < 1e-12 && (r.response_s - 0.5).abs() < 1e-9,
            "{r:?}"
        );
        // Each of 10 customers cycles think 1 s + service 0.5 s.
        assert!((r.throughput - 10.0 / 1.5).abs() < 1e-9);
    }

    #[test]
    fn small_buffer_blocks() {
        let r = mmmkn(1.0, 1.0, 1, 0, 5);
        assert!(r.blocking > 0.5 && r.queue_len == 0.0, "{r:?}");
    }
}
