//! COCO class names in torchvision's 91-index labelling (index 0 is the background, "N/A" marks
//! the ids the COCO 2017 release does not use), as `torchvision.models.detection` weights list them.

/// The 91 torchvision COCO category names, indexed by the detectors' `labels` output.
pub const COCO_CLASSES: [&str; 91] = [
    "__background__",
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "N/A",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "N/A",
    "backpack",
    "umbrella",
    "N/A",
    "N/A",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "N/A",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "N/A",
    "dining table",
    "N/A",
    "N/A",
    "toilet",
    "N/A",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "N/A",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
];

/// The name of a label, or `class <id>` for ids outside the table.
pub fn class_name(label: i64) -> String {
    usize::try_from(label)
        .ok()
        .and_then(|i| COCO_CLASSES.get(i))
        .map_or_else(|| format!("class {label}"), |s| (*s).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ids_and_out_of_range() {
        // COCO category ids: 1 person, 17 cat, 47 cup, 90 toothbrush.
        assert_eq!(class_name(1), "person");
        assert_eq!(class_name(17), "cat");
        assert_eq!(class_name(47), "cup");
        assert_eq!(class_name(90), "toothbrush");
        assert_eq!(class_name(91), "class 91");
        assert_eq!(class_name(-1), "class -1");
    }
}
