//! Lanes: a track shows only properly nested slices, so slices that
//! overlap without nesting are spread over lanes ([`lay_out`]), and a lane
//! is written by walking it in time order ([`walk`]).

use super::Item;

/// Puts `items` on lanes so that each lane's slices nest properly: sorted
/// by begin (longest first), each slice goes to the first lane whose open
/// slice contains it (or that has none open); instants go to lane 0.
pub(crate) fn lay_out(mut items: Vec<Item>) -> Vec<Vec<Item>> {
    items.sort_by(|x, y| {
        (x.begin, std::cmp::Reverse(x.end), x.instant).cmp(&(
            y.begin,
            std::cmp::Reverse(y.end),
            y.instant,
        ))
    });
    let mut lanes: Vec<(Vec<Item>, Vec<u64>)> = Vec::new();
    for it in items {
        let mut chosen = None;
        for (i, (_, open)) in lanes.iter_mut().enumerate() {
            while open.last().is_some_and(|&end| end <= it.begin) {
                open.pop();
            }
            if it.instant || open.last().is_none_or(|&end| it.end <= end) {
                chosen = Some(i);
                break;
            }
        }
        let i = chosen.unwrap_or_else(|| {
            lanes.push((Vec::new(), Vec::new()));
            lanes.len() - 1
        });
        if !it.instant {
            lanes[i].1.push(it.end);
        }
        lanes[i].0.push(it);
    }
    lanes.into_iter().map(|(items, _)| items).collect()
}

/// One step of walking a lane in time order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'a> {
    Begin(&'a Item),
    End(&'a Item),
    Instant(&'a Item),
}

/// Walks a lane laid out by [`lay_out`], calling `f` for each slice's
/// begin and end and each instant, in time order and properly nested.
pub(crate) fn walk<'a>(lane: &'a [Item], mut f: impl FnMut(Step<'a>)) {
    let mut open: Vec<&Item> = Vec::new();
    for it in lane {
        while let Some(top) = open.last().filter(|top| top.end <= it.begin) {
            f(Step::End(top));
            open.pop();
        }
        if it.instant {
            f(Step::Instant(it));
        } else {
            f(Step::Begin(it));
            open.push(it);
        }
    }
    while let Some(top) = open.pop() {
        f(Step::End(top));
    }
}
