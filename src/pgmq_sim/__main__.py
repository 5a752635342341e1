from pgmq_sim.cli import main

main()
