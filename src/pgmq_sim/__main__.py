from pgmq_sim.launch import main

main()
