"""What runs while the workers run: the workers, the producer, the wake-up, the housekeeper, the
bystander, split mode's owners and the fault schedule."""
