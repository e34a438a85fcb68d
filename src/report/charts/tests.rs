use super::*;
use crate::analysis::account::GapAccount;
use crate::analysis::timeline::Point;

#[test]
fn envelopes_keep_the_peak_of_each_column_and_stack() {
    let a: Vec<Point> = vec![(0.0, 10), (0.5, 100), (0.51, 10)];
    let b: Vec<Point> = vec![(0.0, 5)];
    let e = envelopes(&[&a, &b], (0.0, 1.0), 4);
    assert_eq!(e[0], vec![10, 10, 100, 10]);
    assert_eq!(e[1], vec![15, 15, 105, 15]);
}

#[test]
fn the_waterfall_ends_where_the_device_total_is() {
    let g = GapAccount {
        at_s: 1.0,
        device_used: 1000,
        pool_reserved: 400,
        out_of_pool: 600,
        parts: vec![
            crate::analysis::account::GapPart {
                source: crate::analysis::account::PartSource::Library("nccl".into()),
                context: None,
                bytes: 500,
                inferred: false,
            },
            crate::analysis::account::GapPart {
                source: crate::analysis::account::PartSource::LocalMemoryDropped,
                context: None,
                bytes: -50,
                inferred: false,
            },
        ],
        unexplained: 150,
        not_understood: false,
    };
    let rows = waterfall_rows(&g);
    assert_eq!(rows.len(), 5);
    assert_eq!((rows[2].from, rows[2].to), (900, 850));
    assert_eq!(rows[3].to, 1000, "the remainder closes the gap");
    assert!(rows[4].total && rows[4].to == 1000);
}
